"""/healthz, /readyz and /metrics without Flask: what the kubelet's probes and Prometheus's scrapes get.

They reach every worker every few seconds, so the serving worker answers them itself (the probes on its
loop, /metrics in a pool thread: the exposition reads every worker's metric files) and Flask is loaded
only for a request nothing else answers (webhook.server.app, which serves these through the same code).
A worker that never loads Flask, Werkzeug and Jinja holds about 14 MiB less (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook import json_codec
from webhook.policy.class_model import ClassStore
from webhook.server import metrics
from webhook.server.limits import JSON
from webhook.server.store import NamespaceCache

# (status, content type, body)
StatusAnswer = tuple[int, str, bytes]
Probe = Callable[[], StatusAnswer]


def _status(status: int, text: str) -> StatusAnswer:
    return status, JSON, json_codec.dumps({"status": text})


@dataclass(frozen=True)
class Probes:
    """Liveness says the process answers; readiness says both caches have synced, so a review now would be
    decided on real state (until then the Service sends no review here)."""

    store: ClassStore
    namespaces: NamespaceCache | None = None

    def healthz(self) -> StatusAnswer:
        return _status(200, "ok")

    def readyz(self) -> StatusAnswer:
        if not self.store.ready():
            return _status(503, "not ready: PriorityClasses not synced yet")
        if self.namespaces is not None and not self.namespaces.ready():
            return _status(503, "not ready: Namespaces not synced yet")
        return _status(200, "ready")

    def metrics(self) -> StatusAnswer:
        body, content_type = metrics.exposition()
        return 200, content_type, body

    def on_loop(self) -> dict[str, Probe]:
        """The GET paths cheap enough to answer on the event loop (a flag or two read)."""
        return {"/healthz": self.healthz, "/readyz": self.readyz}

    def in_thread(self) -> dict[str, Probe]:
        """The GET paths answered in a pool thread."""
        return {"/metrics": self.metrics}
