"""The webhook's Prometheus metrics, and the /metrics exposition that is correct under several workers.

gunicorn runs several worker processes; each counts into its own files when PROMETHEUS_MULTIPROC_DIR
is set (`serve` sets it before prometheus_client is first imported), and /metrics, answered by any one
worker, must add them all up: that is `MultiProcessCollector` over a registry of its own. Without the
variable (tests, a single process) the default registry is exposed as it is.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import REGISTRY as DEFAULT_REGISTRY

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LABELS = ("webhook", "operation", "resource", "result")
# Admission latency is a few milliseconds; the API server's timeout for a webhook is at most 30 s and the
# chart sets a few seconds, so the buckets stop there.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

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


def observe(webhook: str, operation: str, resource: str, result: str, seconds: float) -> None:
    ADMISSION_REQUESTS.labels(webhook, operation, resource, result).inc()
    ADMISSION_DURATION.labels(webhook, operation, resource, result).observe(seconds)


def exposition() -> tuple[bytes, str]:
    """(body, content type) of /metrics: every worker's metrics in multiprocess mode."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(DEFAULT_REGISTRY), CONTENT_TYPE_LATEST
