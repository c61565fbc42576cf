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


def _status(status: int, text: str, **more: object) -> StatusAnswer:
    return status, JSON, json_codec.dumps({"status": text, **more})


@dataclass(frozen=True)
class Probes:
    """Liveness says the process answers; readiness says the class cache has synced, so a review now would
    be decided on real state (until then the Service sends no review here). The Namespace cache is only a
    condition in the answer (`namespaces`): readiness never waits for it, since only a class with an
    allowed-namespaces rule needs it, and such a class says what it cannot check in its own reviews."""

    store: ClassStore
    namespaces: NamespaceCache | None = None

    def healthz(self) -> StatusAnswer:
        return _status(200, "ok")

    def readyz(self) -> StatusAnswer:
        conditions = {} if self.namespaces is None else {"namespaces": self._namespaces_condition()}
        if not self.store.ready():
            return _status(503, "not ready: PriorityClasses not synced yet", **conditions)
        return _status(200, "ready", **conditions)

    def _namespaces_condition(self) -> str:
        """`synced`, or why allowed-namespaces rules cannot be checked now (the cause, one line)."""
        assert self.namespaces is not None
        if self.namespaces.ready():
            return "synced"
        cause = self.namespaces.failure()
        return f"not synced: {cause}" if cause else "not synced yet"

    def metrics(self) -> StatusAnswer:
        body, content_type = metrics.exposition()
        return 200, content_type, body

    def on_loop(self) -> dict[str, Probe]:
        """The GET paths cheap enough to answer on the event loop (a flag or two read)."""
        return {"/healthz": self.healthz, "/readyz": self.readyz}

    def in_thread(self) -> dict[str, Probe]:
        """The GET paths answered in a pool thread."""
        return {"/metrics": self.metrics}
