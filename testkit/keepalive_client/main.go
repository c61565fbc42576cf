// A client that calls a webhook the way the API server does: Go's net/http Transport over TLS with
// kept-alive connections to one host name (checked against the certificate through SNI), the endpoint
// chosen only when a connection is dialled. Several goroutines POST AdmissionReviews back to back and
// count every request that did not get a 200 with a review in it.
//
// Commands, one a line on standard input; each is answered with one JSON line of counts on standard output:
//
//	endpoints HOST:PORT[,HOST:PORT...]   where new connections go from now on (an endpoint removed)
//	counts                              the counts so far
//	stop                                stop sending, wait for the requests in flight, then answer
//
// Counts: ok, failed, the first errors seen, and per endpoint the requests answered on connections to it
// (all, and since the last `endpoints` command).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"
)

type counts struct {
	Ok           int            `json:"ok"`
	Failed       int            `json:"failed"`
	Errors       []string       `json:"errors"`
	Answered     map[string]int `json:"answered"`
	AnsweredLate map[string]int `json:"answeredSinceEndpoints"`
}

type client struct {
	mu        sync.Mutex
	endpoints []string
	next      int
	counts    counts
}

func (c *client) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	c.mu.Lock()
	endpoint := c.endpoints[c.next%len(c.endpoints)]
	c.next++
	c.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, endpoint)
}

func (c *client) record(endpoint string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.counts.Failed++
		if len(c.counts.Errors) < 10 {
			c.counts.Errors = append(c.counts.Errors, err.Error())
		}
		return
	}
	c.counts.Ok++
	c.counts.Answered[endpoint]++
	c.counts.AnsweredLate[endpoint]++
}

func (c *client) snapshot() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, _ := json.Marshal(c.counts)
	return data
}

// post sends one review; the endpoint is the address of the connection that carried it.
func post(httpClient *http.Client, url string, body []byte) (string, error) {
	endpoint := ""
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		endpoint = info.Conn.RemoteAddr().String()
	}}
	request, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	request = request.WithContext(httptrace.WithClientTrace(request.Context(), trace))
	request.Header.Set("Content-Type", "application/json")
	response, err := httpClient.Do(request)
	if err != nil {
		return endpoint, err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	if err != nil {
		return endpoint, err
	}
	if response.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"response"`)) {
		return endpoint, fmt.Errorf("HTTP %d: %.200s", response.StatusCode, answer)
	}
	return endpoint, nil
}

func main() {
	caFile := flag.String("ca", "", "CA certificate (PEM) of the server")
	serverName := flag.String("server-name", "localhost", "the name the certificate is checked against (SNI)")
	endpoints := flag.String("endpoints", "", "HOST:PORT[,HOST:PORT...] new connections go to")
	reviewFile := flag.String("review", "", "the AdmissionReview (JSON) to POST")
	path := flag.String("path", "/mutate", "the path to POST to")
	connections := flag.Int("connections", 8, "concurrent requests, each on a connection of its own")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "no certificate in", *caFile)
		os.Exit(2)
	}
	body, err := os.ReadFile(*reviewFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c := &client{
		endpoints: strings.Split(*endpoints, ","),
		counts:    counts{Errors: []string{}, Answered: map[string]int{}, AnsweredLate: map[string]int{}},
	}
	transport := &http.Transport{
		DialContext:         c.dial,
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: *serverName, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: *connections,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	httpClient := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	url := "https://" + *serverName + *path

	stop := make(chan struct{})
	var running sync.WaitGroup
	for i := 0; i < *connections; i++ {
		running.Add(1)
		go func() {
			defer running.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				endpoint, err := post(httpClient, url, body)
				c.record(endpoint, err)
			}
		}()
	}

	out := bufio.NewWriter(os.Stdout)
	commands := bufio.NewScanner(os.Stdin)
	for commands.Scan() {
		command, argument, _ := strings.Cut(strings.TrimSpace(commands.Text()), " ")
		switch command {
		case "endpoints":
			c.mu.Lock()
			c.endpoints = strings.Split(argument, ",")
			c.counts.AnsweredLate = map[string]int{}
			c.mu.Unlock()
		case "stop":
			close(stop)
			running.Wait()
			out.Write(c.snapshot())
			out.WriteString("\n")
			out.Flush()
			return
		case "counts":
		default:
			fmt.Fprintln(os.Stderr, "unknown command:", command)
			os.Exit(2)
		}
		out.Write(c.snapshot())
		out.WriteString("\n")
		out.Flush()
	}
}
