"""The webhook's Prometheus metrics, and the /metrics exposition that is correct under several workers.

gunicorn runs several worker processes; each counts into its own files when PROMETHEUS_MULTIPROC_DIR
is set (`serve` sets it before prometheus_client is first imported), and /metrics, answered by any one
worker, must add them all up: that is `MultiProcessCollector` over a registry of its own. Without the
variable (tests, a single process) the default registry is exposed as it is.

A multi-process registry cannot compute a value at scrape time, so the serving certificate's expiry is
stored as a timestamp (set by the worker that loaded the certificate) and the seconds left are derived
from it while the exposition is written.

The process metrics (`process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`, ...)
are per process and cannot be added up: under several workers they are read from /proc at scrape time for
every live process that keeps metric files, each with a `pid` label (a single process exports its own
through the default registry, without the label). The certificate is labelled by its file name, never by
its path on the machine.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client import REGISTRY as DEFAULT_REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric

from webhook import __version__

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LABELS = ("webhook", "operation", "resource", "result")
# Admission latency is a few milliseconds; the API server's timeout for a webhook is at most 30 s and the
# chart sets a few seconds, so the buckets stop there.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

BUILD_INFO = Gauge(
    "priority_webhook_build_info",
    "Always 1: the running version of priority-webhook and of Python, as labels.",
    ["version", "python_version"],
    multiprocess_mode="max",
)
ADMISSION_REQUESTS = Counter(
    "priority_webhook_admission_requests",
    "AdmissionReviews answered, by webhook (mutate/validate), operation, resource and result "
    "(allowed, denied, unavailable before the class cache synced, or error for a malformed review or an "
    "internal failure).",
    LABELS,
)
ADMISSION_DURATION = Histogram(
    "priority_webhook_admission_duration_seconds",
    "Time to answer an AdmissionReview, from the body read to the response built.",
    LABELS,
    buckets=BUCKETS,
)
UNRESOLVED_PODS = Counter(
    "priority_webhook_unresolved_pods",
    "Pods admitted by /validate in a system namespace without spec.priority: their /mutate call was "
    "skipped (webhook timeout or outage under the fail-open entries), so they run without the priority "
    "their class gives. Any increase deserves a look.",
)
NAMESPACE_RULE = Counter(
    "priority_webhook_namespace_rule",
    "Objects (pods, pod templates, PodGroups) a PriorityClass's allowed-namespaces rule spoke on, by "
    "class and result: denied (refused, enforcement deny) or warned (admitted with a warning, enforcement "
    "audit). Counted once per object: pods at /validate, PodGroups at /mutate, workloads at /validate.",
    ["priority_class", "result"],
)
CERTIFICATE_NOT_AFTER = Gauge(
    "priority_webhook_serving_certificate_not_after_timestamp_seconds",
    "Unix time at which the serving certificate in use expires (earliest over live workers), by file. "
    "Absent until a worker has loaded the certificate.",
    ["file"],
    multiprocess_mode="livemin",
)
OPEN_CONNECTIONS = Gauge(
    "priority_webhook_open_connections",
    "Client connections the serving processes hold (TLS handshakes, requests being read or answered, idle "
    "kept-alive ones); each worker holds at most --max-connections.",
    multiprocess_mode="livesum",
)
CONNECTIONS_CLOSED = Counter(
    "priority_webhook_connections_closed_by_server",
    "Connections the server closed before the client did, by reason: handshake (failed or not done within "
    "--read-timeout), silent (no request within --read-timeout), deadline (a request not complete within "
    "--read-timeout, answered 408), protocol (a malformed or too large request, answered 4xx), idle (kept "
    "alive for --keepalive without a request), limit (the oldest waiting connection, to make room at "
    "--max-connections), write (the client did not read its answer).",
    ["reason"],
)
CLOSE_REASONS = ("handshake", "silent", "deadline", "protocol", "idle", "limit", "write")
CERTIFICATE_EXPIRY = "priority_webhook_serving_certificate_expiry_seconds"
CERTIFICATE_EXPIRY_HELP = (
    "Seconds until the serving certificate in use expires (negative once expired); computed at scrape time "
    "from priority_webhook_serving_certificate_not_after_timestamp_seconds."
)

# The (webhook, operation, resource) triples the chart routes to the server, and the labels of a review
# that could not be read. Their failure results are exported at 0 from the start, so that an alert on
# `rate(...{result="error"}[5m]) > 0` or `increase(...)` sees the first failure.
ROUTES = (
    ("mutate", "CREATE", "pods"),
    ("mutate", "UPDATE", "pods"),
    ("validate", "CREATE", "pods"),
    ("validate", "CREATE", "pods/eviction"),
    ("validate", "CREATE", "priorityclasses.scheduling.k8s.io"),
    ("validate", "UPDATE", "priorityclasses.scheduling.k8s.io"),
    ("validate", "DELETE", "priorityclasses.scheduling.k8s.io"),
    ("mutate", "CREATE", "podgroups.scheduling.k8s.io"),  # with admission.podGroups.enabled
    ("mutate", "unknown", "unknown"),
    ("validate", "unknown", "unknown"),
)
FAILURE_RESULTS = ("error", "unavailable")


def initialize() -> None:
    """Build info at 1 and every failure counter at 0 (idempotent)."""
    BUILD_INFO.labels(__version__, platform.python_version()).set(1)
    for webhook, operation, resource in ROUTES:
        for result in FAILURE_RESULTS:
            ADMISSION_REQUESTS.labels(webhook, operation, resource, result)
    for reason in CLOSE_REASONS:
        CONNECTIONS_CLOSED.labels(reason)


def observe(webhook: str, operation: str, resource: str, result: str, seconds: float) -> None:
    ADMISSION_REQUESTS.labels(webhook, operation, resource, result).inc()
    ADMISSION_DURATION.labels(webhook, operation, resource, result).observe(seconds)


def observe_connections(open_now: int, closed: dict[str, int]) -> None:
    """A worker's connection count now, and the closes it made since its last report."""
    OPEN_CONNECTIONS.set(open_now)
    for reason, count in closed.items():
        CONNECTIONS_CLOSED.labels(reason).inc(count)


def set_certificate_not_after(cert_file: str, timestamp: float) -> None:
    CERTIFICATE_NOT_AFTER.labels(os.path.basename(cert_file)).set(timestamp)


class _WithCertificateExpiry:
    """Passes `source`'s metrics through, adding the seconds left derived from the expiry timestamp."""

    def __init__(self, source: Any, clock: Any = time.time) -> None:
        self.source = source
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        for family in self.source.collect():
            yield family
            if family.name == CERTIFICATE_NOT_AFTER._name and family.samples:
                now = self.clock()
                left = GaugeMetricFamily(CERTIFICATE_EXPIRY, CERTIFICATE_EXPIRY_HELP, labels=["file"])
                for sample in family.samples:
                    left.add_metric([sample.labels["file"]], sample.value - now)
                yield left


class _ProcessesWithMetricFiles:
    """process_* of every live process that writes into the multiprocess directory, labelled by pid."""

    FILE = re.compile(r"_(\d+)\.db$")

    def __init__(self, directory: str, proc: str = "/proc") -> None:
        self.directory = directory
        self.proc = proc

    def pids(self) -> list[int]:
        found = set()
        for name in os.listdir(self.directory):
            match = self.FILE.search(name)
            if match and os.path.isdir(os.path.join(self.proc, match.group(1))):
                found.add(int(match.group(1)))
        return sorted(found)

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for pid in self.pids():
            collector = ProcessCollector(pid=functools.partial(str, pid), proc=self.proc, registry=None)
            for family in collector.collect():
                target = merged.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for sample in family.samples:
                    target.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
        yield from merged.values()


def exposition() -> tuple[bytes, str]:
    """(body, content type) of /metrics: every worker's metrics in multiprocess mode."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        source = CollectorRegistry()
        multiprocess.MultiProcessCollector(source)
        registry.register(_WithCertificateExpiry(source))
        registry.register(_ProcessesWithMetricFiles(os.environ[MULTIPROC_ENV]))
    else:
        registry.register(_WithCertificateExpiry(DEFAULT_REGISTRY))
    return generate_latest(registry), CONTENT_TYPE_LATEST


initialize()
