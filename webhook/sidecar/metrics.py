"""Sidecar metrics: the kubelet's preemption and pod-worker metrics, adapted (default registry).

* `preemptions_total{resource}`: +1 per victim evicted successfully, labelled with the first insufficient
  resource, as `kubelet_preemptions{preemption_signal}`.
* `victims_per_preemption`: victims chosen per preemption round.
* `eviction_failures_total{reason}`: refused or failed evictions, by the API's Status reason
  (`TooManyRequests` is a PodDisruptionBudget refusal); the usual reasons are exported at 0 from the start.
* `pods{state,static}`: this node's pods by lifecycle state, as `kubelet_working_pods`; `static` is
  "true" or "false" (every combination is always exported, 0 when absent).
* `sync_age_seconds`: age of the stalest watch (list, event or bookmark).
* `build_info{version,python_version}`: always 1.
* `dry_run_victims_total{resource}`: victims a `--dry-run` sidecar would have evicted.
"""

from __future__ import annotations

import platform

from prometheus_client import Counter, Gauge, Histogram

from webhook import __version__

PREFIX = "priority_webhook_sidecar"
# Refusals and failures an operator should see from the first scrape, not only once one happened:
# a PodDisruptionBudget (TooManyRequests), missing RBAC (Forbidden), the API server failing or unreachable.
KNOWN_FAILURE_REASONS = ("TooManyRequests", "Forbidden", "InternalError", "Unreachable")

BUILD_INFO = Gauge(
    f"{PREFIX}_build_info",
    "Always 1: the running version of priority-webhook and of Python, as labels.",
    ["version", "python_version"],
)

PREEMPTIONS = Counter(
    f"{PREFIX}_preemptions",
    "Cumulative number of pods evicted to admit a critical pod, by the first insufficient resource.",
    ["resource"],
)
VICTIMS_PER_PREEMPTION = Histogram(
    f"{PREFIX}_victims_per_preemption",
    "Number of victims chosen per preemption round.",
    buckets=(1, 2, 3, 5, 8, 13, 21, 34, 55, 110),
)
EVICTION_FAILURES = Counter(
    f"{PREFIX}_eviction_failures",
    "Evictions refused or failed, by reason (TooManyRequests: a PodDisruptionBudget forbids it).",
    ["reason"],
)
PODS = Gauge(
    f"{PREFIX}_pods",
    "Pods bound to this node by lifecycle state (desired, active, terminating, terminated) and "
    "whether the pod is static (a mirror pod).",
    ["state", "static"],
)
SYNC_AGE = Gauge(
    f"{PREFIX}_sync_age_seconds",
    "Seconds since the stalest of the node and pod watches last heard from the API server.",
)
DRY_RUN_VICTIMS = Counter(
    f"{PREFIX}_dry_run_victims",
    "Pods a --dry-run sidecar would have evicted, by the first insufficient resource.",
    ["resource"],
)


def set_pod_counts(counts: dict[tuple[str, bool], int]) -> None:
    for (state, static), value in counts.items():
        PODS.labels(state=state, static="true" if static else "false").set(value)


def initialize() -> None:
    BUILD_INFO.labels(__version__, platform.python_version()).set(1)
    for reason in KNOWN_FAILURE_REASONS:
        EVICTION_FAILURES.labels(reason=reason)


initialize()
