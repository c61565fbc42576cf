// The floor: the least any admission webhook can add to a pod creation. Standard library only, so that
// what it costs is the API server's call and Go's HTTPS serving (HTTP/2 where the client offers it),
// nothing else. /mutate answers every review with the patch given by -patch (base64 JSONPatch, the one
// ours sends for the benchmark's pod), /validate answers allowed. /metrics counts the reviews under our
// webhook's metric names, so that benchmarks/admission_overhead.py treats it as one more arm.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"
)

type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID string `json:"uid"`
	} `json:"request,omitempty"`
	Response map[string]any `json:"response,omitempty"`
}

type counter struct {
	sync.Mutex
	count   map[string]int
	seconds map[string]float64
}

func (c *counter) add(path string, took time.Duration) {
	c.Lock()
	defer c.Unlock()
	c.count[path]++
	c.seconds[path] += took.Seconds()
}

func answer(patch string, reviews *counter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		started := time.Now()
		var in review
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 7<<20)).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, `{"error":"not an AdmissionReview"}`, http.StatusBadRequest)
			return
		}
		response := map[string]any{"uid": in.Request.UID, "allowed": true}
		if r.URL.Path == "/mutate" && patch != "" {
			response["patchType"] = "JSONPatch"
			response["patch"] = patch
		}
		out := review{APIVersion: in.APIVersion, Kind: in.Kind, Response: response}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			log.Printf("answer: %v", err)
		}
		reviews.add(r.URL.Path, time.Since(started))
	}
}

func main() {
	bind := flag.String("bind", "127.0.0.1:8443", "address to serve on")
	cert := flag.String("cert", "tls.crt", "serving certificate (PEM)")
	key := flag.String("key", "tls.key", "its private key (PEM)")
	patch := flag.String("patch", "", "base64 JSONPatch for /mutate (none when empty)")
	flag.Parse()
	reviews := &counter{count: map[string]int{}, seconds: map[string]float64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mutate", answer(*patch, reviews))
	mux.HandleFunc("POST /validate", answer(*patch, reviews))
	for _, path := range []string{"/healthz", "/readyz"} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		reviews.Lock()
		defer reviews.Unlock()
		for path, n := range reviews.count {
			fmt.Fprintf(w, "priority_webhook_admission_duration_seconds_count{path=%q} %d\n", path, n)
			fmt.Fprintf(w, "priority_webhook_admission_duration_seconds_sum{path=%q} %f\n", path, reviews.seconds[path])
		}
	})
	server := &http.Server{Addr: *bind, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("floor webhook on https://%s", *bind)
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
