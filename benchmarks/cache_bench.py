"""PriorityClass cache: change-to-review latency, and the cost of a cached lookup.

    .venv/bin/python benchmarks/cache_bench.py [--changes 200] [--repeat 7]

1. Propagation, end to end: the real server (`serve --kubeconfig`, one worker, HTTPS) on the in-repo test
   API server. Each change creates a class on the API server, then reviews are sent back to back until
   one resolves the new class; the time from the write to that answer is one sample (it includes the
   review round trip, ~1-3 ms, that observes it). p50 / p99 / max over `--changes` changes.
2. Propagation, in process: the same with a ClusterClassStore polled directly (the cache's own delay;
   the API server, the reflector and the poller share one process and its GIL here).
3. Lookup: `store.snapshot()[name]` and `store.snapshot().default()` against a plain dict lookup measured
   in the same run (the baseline); best of `--repeat` timings, printed as ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.kubeapi import KubeAPIServer
from testkit.reviews import pod, review
from testkit.server import webhook_server
from webhook.kube.class_store import ClusterClassStore

DEADLINE = 5.0  # per change: a change not seen by then is a failure, not a sample


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms (n={len(ordered)})"
    )


def until(condition, start: float, pause: float = 0.0) -> float:
    """Poll `condition`; `pause` lets an in-process poller yield the GIL to the threads it waits on."""
    while not condition():
        if time.perf_counter() - start > DEADLINE:
            raise SystemExit(f"a change was not seen within {DEADLINE}s")
        if pause:
            time.sleep(pause)
    return time.perf_counter() - start


def end_to_end(api: KubeAPIServer, changes: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.kubeconfig(str(Path(tmp) / "kubeconfig"))
        with webhook_server(Path(tmp), "--kubeconfig", kubeconfig, "--workers", "1") as server:

            def resolved(name: str) -> bool:
                body = review(pod(class_name=name))
                answer = server.session.post(server.url + "/mutate", json=body, timeout=5)
                return answer.json()["response"]["allowed"]

            until(
                lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
                time.perf_counter(),
            )
            samples = []
            for i in range(changes):
                name = f"e2e-{i}"
                start = time.perf_counter()
                api.create("priorityclasses", {"metadata": {"name": name}, "value": i})
                samples.append(until(lambda name=name: resolved(name), start))
            return samples


def in_process(api: KubeAPIServer, changes: int) -> list[float]:
    store = ClusterClassStore(api.api_client())
    store.start()
    try:
        assert store.wait_ready(10)
        samples = []
        for i in range(changes):
            name = f"local-{i}"
            start = time.perf_counter()
            api.create("priorityclasses", {"metadata": {"name": name}, "value": i})
            samples.append(until(lambda name=name: name in store.snapshot(), start, pause=0.0001))
        return samples
    finally:
        store.stop()


def lookups(api: KubeAPIServer, repeat: int) -> None:
    store = ClusterClassStore(api.api_client())
    store.start()
    try:
        assert store.wait_ready(10)
        plain = {name: store.snapshot()[name] for name in store.snapshot()}
        name = next(iter(plain))

        def best(stmt) -> float:
            loops, _ = timeit.Timer(stmt).autorange()
            return min(timeit.Timer(stmt).repeat(repeat, loops)) / loops

        baseline = best(lambda: plain[name])
        cached = best(lambda: store.snapshot()[name])
        default = best(lambda: store.snapshot().default())
        print(
            f"lookup: dict baseline {baseline * 1e9:.0f} ns; snapshot()[name] {cached * 1e9:.0f} ns "
            f"({cached / baseline:.1f}x); snapshot().default() {default * 1e9:.0f} ns "
            f"({default / baseline:.1f}x) with {len(plain)} classes"
        )
    finally:
        store.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with KubeAPIServer(bookmark_interval=30) as api:
        print(
            "end to end (API write -> first HTTPS review that sees it):",
            percentiles(end_to_end(api, args.changes)),
        )
        print("in process (API write -> snapshot has it):", percentiles(in_process(api, args.changes)))
        lookups(api, args.repeat)


if __name__ == "__main__":
    main()
