"""Run the webhook under gunicorn: TLS only, our asyncio worker with keep-alive, graceful SIGTERM.

Why these settings:
- the worker class is webhook.server.worker.AsyncWorker: connections are owned by an asyncio loop that
  reads each request whole, under one deadline, before `threads` pool threads run it, so slow or silent
  clients cost no thread (gunicorn's gthread reads requests in its pool threads: see that module).
- keep-alive of 75 s: the API server keeps idle connections to a webhook for about a minute and a half
  (Go's default), so a short server-side keep-alive would mean a fresh handshake for most reviews.
- the app is loaded in each worker after the fork, so a cluster-backed class store opens its own watch
  per process; the master only validates the configuration, to fail fast. The worker answers reviews and
  probes through the endpoints and probes `load()` makes; the Flask app over them is built only for a
  request they do not answer. What does survive a fork is loaded before it: the master imports the
  workers' modules (the serving loop, the endpoints, the caches' code, not Flask) and
  freezes its objects out of the cyclic collector just before each fork (`gc.freeze`), so the workers
  share those pages with it instead of each holding a copy (a collection in a worker would otherwise
  write to every inherited object's header, and so copy nearly every page it inherited).
- no access log by default; gunicorn never logs bodies, and neither do we.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from webhook.files.tls import TLS_CERT, TLS_KEY
from webhook.policy.class_model import ClassStore
from webhook.policy.eviction_rules import PodNodes
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.server.limits import KEEPALIVE, MAX_CONNECTIONS, REQUEST_TIMEOUT, SHUTDOWN_DELAY, Limits
from webhook.server.store import (
    NamespaceCache,
    StoreSpec,
    close_pod_nodes,
    close_store,
    open_namespaces,
    open_pod_nodes,
    open_store,
)
from webhook.server.tlscontext import ReloadingContext
from webhook.server.wsgi import LazyApp

if TYPE_CHECKING:  # they load prometheus_client: only once `serve` has chosen the metrics directory
    from webhook.server.endpoint import ReviewEndpoint
    from webhook.server.probes import Probes

log = logging.getLogger(__name__)

METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_CLASS = "webhook.server.worker.AsyncWorker"
# For measurements only (benchmarks compare the serving designs in one run): another gunicorn worker
# class, e.g. `gthread`, the one used before. Its bounds on slow clients are weaker (see worker.py).
WORKER_CLASS_ENV = "PRIORITY_WEBHOOK_WORKER_CLASS"
# What every worker imports on `load()`: imported by the master before it forks, so it is shared.
WORKER_MODULES = (
    "webhook.server.worker",
    "webhook.server.endpoint",
    "webhook.server.probes",
    "webhook.kube.class_store",
    "webhook.kube.namespace_store",
    "webhook.kube.pod_nodes",
)


@dataclass
class ServeSettings:
    bind: str = "0.0.0.0:8443"
    cert_dir: Path = Path("certs")
    store: StoreSpec = field(default_factory=StoreSpec)
    options: PodOptions = DEFAULT_POD_OPTIONS
    workers: int = 2
    threads: int = 8
    keepalive: float = KEEPALIVE
    max_connections: int = MAX_CONNECTIONS
    graceful_timeout: int = 25
    shutdown_delay: float = SHUTDOWN_DELAY
    read_timeout: float = REQUEST_TIMEOUT
    access_log: bool = False
    log_level: str = "info"


class WebhookApplication(BaseApplication):  # type: ignore[misc]  # gunicorn has no type information
    """gunicorn's application API with our settings; `load()` runs in each worker."""

    def __init__(self, settings: ServeSettings, tls: ReloadingContext, store: ClassStore | None = None):
        self.settings = settings
        self.tls = tls
        # A store built in the master (the static one: immutable, safe to share across fork), or None to
        # have each worker open its own (the cluster one).
        self.master_store = store
        self.worker_store: ClassStore | None = None
        self.worker_pods: PodNodes | None = None
        self.worker_namespaces: NamespaceCache | None = None
        self.worker_endpoints: dict[str, ReviewEndpoint] = {}
        self.worker_probes: Probes | None = None
        super().__init__()

    def load_config(self) -> None:
        s = self.settings
        config: dict[str, Any] = {
            "bind": [s.bind],
            "workers": s.workers,
            "threads": s.threads,
            "worker_class": os.environ.get(WORKER_CLASS_ENV) or WORKER_CLASS,
            "keepalive": max(1, round(s.keepalive)),  # gunicorn's own is whole seconds; ours is exact
            "worker_connections": s.max_connections,
            "graceful_timeout": s.graceful_timeout,
            "timeout": 30,
            "preload_app": False,
            "certfile": str(self.tls.cert_file),
            "keyfile": str(self.tls.key_file),
            "ssl_context": self._ssl_context,
            "accesslog": "-" if s.access_log else None,
            "errorlog": "-",
            "loglevel": s.log_level,
            "proc_name": "priority-webhook",
            # gunicorn's management socket (in $HOME) is not needed and is one more way in: off.
            "control_socket_disable": True,
            "child_exit": _child_exit,
            "worker_exit": self._worker_exit,
            "pre_fork": _pre_fork,
        }
        for key, value in config.items():
            self.cfg.set(key, value)
        for module in WORKER_MODULES if s.store.cluster else WORKER_MODULES[:3]:
            importlib.import_module(module)

    def serving_limits(self) -> Limits:
        """Read by the worker (webhook.server.worker): gunicorn has no setting for a request deadline."""
        s = self.settings
        return Limits(
            request_timeout=s.read_timeout,
            keepalive=s.keepalive,
            max_connections=s.max_connections,
            shutdown_delay=s.shutdown_delay,
        )

    def _ssl_context(self, conf: Any, default_factory: Any) -> Any:
        # Called per accepted connection: the current (possibly just rotated) certificate.
        return self.tls.current()

    def load(self) -> Any:
        from webhook.server.endpoint import endpoints
        from webhook.server.probes import Probes

        self.tls.watch()  # in this worker: export the certificate's expiry and follow rotations

        self.worker_store = (
            self.master_store if self.master_store is not None else open_store(self.settings.store)
        )
        self.worker_pods = open_pod_nodes(self.settings.store)
        self.worker_namespaces = open_namespaces(self.settings.store)
        self.worker_endpoints = endpoints(
            self.worker_store, self.settings.options, pods=self.worker_pods, namespaces=self.worker_namespaces
        )
        self.worker_probes = Probes(self.worker_store, self.worker_namespaces)
        return LazyApp(self._flask_app)

    def _flask_app(self) -> Any:
        # Only for a request the worker does not answer itself (an unknown path or method): most workers
        # never load the web framework (webhook.server.probes).
        from webhook.server.app import app_for

        assert self.worker_probes is not None
        return app_for(self.worker_endpoints, self.worker_probes)

    def review_endpoints(self) -> dict[str, Any]:
        """Read by the worker after `load()`: the admission paths it answers itself, by path."""
        return self.worker_endpoints

    def status_probes(self) -> Probes | None:
        """Read by the worker after `load()`: /healthz, /readyz and /metrics, answered without the app."""
        return self.worker_probes

    def _worker_exit(self, server: Any, worker: Any) -> None:
        if self.worker_store is not None and self.worker_store is not self.master_store:
            close_store(self.worker_store)
        close_pod_nodes(self.worker_pods)
        close_store(self.worker_namespaces)


def _pre_fork(server: Any, worker: Any) -> None:
    """In the master, before each fork: what exists now is never collected here again, nor in the worker
    (the master's own garbage is made by its rotator, and is not cyclic)."""
    gc.freeze()


def _child_exit(server: Any, worker: Any) -> None:
    """In the master: a dead worker's live gauges must not be summed any more."""
    if os.environ.get(METRICS_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


@contextmanager
def metrics_dir() -> Iterator[Path]:
    """A fresh PROMETHEUS_MULTIPROC_DIR for this server, removed when the master exits.

    Must be entered before prometheus_client is first imported: it picks its storage at import. When the
    variable is already set (a volume mounted for it), the fresh directory is made inside it. Workers
    leave through SystemExit from the fork and pass through here too: only the master cleans up.
    """
    parent = os.environ.get(METRICS_ENV) or None
    path = Path(tempfile.mkdtemp(prefix="priority-webhook-metrics-", dir=parent))
    os.environ[METRICS_ENV] = str(path)
    values: Any = sys.modules.get("prometheus_client.values")
    if values is not None:  # imported early by some other module: metrics made from now on use the dir
        values.ValueClass = values.get_value_class()
    owner = os.getpid()
    try:
        yield path
    finally:
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)
            if parent is None:
                del os.environ[METRICS_ENV]
            else:
                os.environ[METRICS_ENV] = parent
            values = sys.modules.get("prometheus_client.values")
            if values is not None:  # metrics made from now on go back to the storage of the restored setting
                values.ValueClass = values.get_value_class()


def cert_files(cert_dir: Path) -> tuple[Path, Path]:
    return cert_dir / TLS_CERT, cert_dir / TLS_KEY
