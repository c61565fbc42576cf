"""Prometheus metrics of the list/watch caches, labelled by reflector name.

The webhook runs several gunicorn workers with PROMETHEUS_MULTIPROC_DIR set, each with its own reflector,
so every gauge says how worker values combine: `synced` and the last-activity timestamp take the minimum
over live workers (the worst worker is what an alert must see), the object count the maximum.
Staleness is exported as a timestamp, not as an age, because a multi-process registry cannot compute a
value at scrape time; alert on `time() - priority_webhook_cache_last_activity_timestamp_seconds`.
Reflector names are fixed words (`priorityclasses`, `node`, `pods`), never a node or object name: one
series per reflector whatever the cluster's size. The failure counters start at 0 when a reflector starts.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

SYNCED = Gauge(
    "priority_webhook_cache_synced",
    "1 once the cache's first LIST has landed (minimum over live workers)",
    ["reflector"],
    multiprocess_mode="livemin",
)
OBJECTS = Gauge(
    "priority_webhook_cache_objects",
    "Objects in the cache (for the priorityclasses reflector: the number of classes)",
    ["reflector"],
    multiprocess_mode="livemax",
)
LAST_ACTIVITY = Gauge(
    "priority_webhook_cache_last_activity_timestamp_seconds",
    "Unix time of the last successful LIST or watch activity (event, bookmark, clean watch end); "
    "minimum over live workers",
    ["reflector"],
    multiprocess_mode="livemin",
)
EVENTS = Counter(
    "priority_webhook_cache_watch_events_total",
    "Watch events received, by type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)",
    ["reflector", "type"],
)
RELISTS = Counter(
    "priority_webhook_cache_relists_total",
    "LISTs after the first: a watch answered 410 Gone (resourceVersion too old)",
    ["reflector"],
)
RECONNECTS = Counter(
    "priority_webhook_cache_reconnects_total",
    "Failed LIST or WATCH attempts (dropped connection, read timeout, 5xx, ...) retried after a backoff",
    ["reflector"],
)
FAILURE_KINDS = ("forbidden", "not_found", "unavailable", "other")
FAILING = Gauge(
    "priority_webhook_cache_failing",
    "1 while the cache's last LIST or WATCH attempt failed, labelled by the kind of failure (forbidden: "
    "401/403, not_found: 404, unavailable: no answer or 5xx, other); all 0 while requests succeed. Maximum "
    "over live workers",
    ["reflector", "reason"],
    multiprocess_mode="livemax",
)
NAMESPACE_RULE_CLASSES = Gauge(
    "priority_webhook_namespace_rule_classes",
    "PriorityClasses in the cache that carry a priority-webhook.io/allowed-namespaces rule: while above 0, "
    "the Namespace cache is needed (maximum over live workers)",
    multiprocess_mode="livemax",
)
