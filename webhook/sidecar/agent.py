"""The sidecar's loop: keep the node view, ask `decide` what to do, carry it out.

Two reflectors (the Node by name, the pods bound to it in all namespaces, each kept without the fields no
decision reads: webhook.sidecar.pod_fields) fill two caches; every change
wakes the loop, which runs the pure `decide` on a snapshot and performs the actions in order. All that is
kept in memory is a set of hints (evictions just accepted, retry backoff, reports already made); the
durable state is the record on each rejected pod, written with a resourceVersion test so a decision made
on a stale view can never be written (and therefore never acted on).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from webhook.kube import rest
from webhook.kube.cache import ObjectCache
from webhook.kube.events import EventRecorder
from webhook.kube.reflector import Reflector
from webhook.sidecar import metrics
from webhook.sidecar.actions import Action, Settings
from webhook.sidecar.decide import decide
from webhook.sidecar.execute import Executor
from webhook.sidecar.lifecycle import state_counts
from webhook.sidecar.memory import Memory
from webhook.sidecar.pod_fields import kept_fields
from webhook.sidecar.ratelimit import EvictionRateLimit

log = logging.getLogger("webhook.sidecar")

COMPONENT = "priority-webhook-sidecar"


class Sidecar:
    def __init__(
        self,
        api_client: rest.Client,
        settings: Settings,
        *,
        ignore_pdb: bool = False,
        max_evictions_per_minute: int = 30,
        resync_seconds: float = 30.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        reflector_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.api_client = api_client
        self.settings = settings
        self.ignore_pdb = ignore_pdb
        self.limiter = EvictionRateLimit(max_evictions_per_minute)
        self.resync_seconds = resync_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.clock = clock
        self.events = EventRecorder(api_client, component=COMPONENT, host=settings.node_name)
        self.nodes = ObjectCache()
        self.pods = ObjectCache()
        options = dict(reflector_options or {})
        self.reflectors = (
            Reflector(
                api_client,
                rest.collection(rest.CORE_V1, "nodes"),
                self.nodes,
                name="node",  # a metric label: no node names in label values
                field_selector=f"metadata.name={settings.node_name}",
                list_from_watch_cache=True,
                **options,
            ),
            Reflector(
                api_client,
                rest.collection(rest.CORE_V1, "pods"),
                self.pods,
                name="pods",
                field_selector=f"spec.nodeName={settings.node_name}",
                # thousands of agents: served from the watch cache, never an etcd scan of every pod
                list_from_watch_cache=True,
                transform=kept_fields,  # what the decisions read, not managedFields, env and probes
                **options,
            ),
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.nodes.add_listener(self._changed)
        self.pods.add_listener(self._changed)
        self.memory = Memory()  # hints (see actions.Hints); only the loop thread touches them
        self.executor = Executor(
            api_client,
            self.events,
            self.limiter,
            self.memory,
            ignore_pdb=ignore_pdb,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            clock=clock,
        )
        self.steps = 0

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        for reflector in self.reflectors:
            reflector.start()
        self._thread = threading.Thread(target=self._run, name="sidecar", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Finish the action in progress, then stop the loop and the watches."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for reflector in self.reflectors:
            reflector.stop(timeout)

    @property
    def ready(self) -> bool:
        return all(r.synced for r in self.reflectors)

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(r.wait_synced(max(0.0, deadline - time.monotonic())) for r in self.reflectors)

    def seconds_since_last_sync(self) -> float:
        stalest = min(r.last_activity for r in self.reflectors)
        return max(0.0, time.monotonic() - stalest) if stalest else float("inf")

    def _changed(self, *_: Any) -> None:
        self._wake.set()

    def _run(self) -> None:
        timeout = self.resync_seconds
        while not self._stop.is_set():
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                break
            if not self.ready:
                timeout = self.resync_seconds
                continue
            try:
                timeout = self.step()
            except Exception:  # keep the agent alive; the next change or resync tries again
                log.exception("sidecar step failed")
                timeout = self.backoff_initial

    # -- one pass -----------------------------------------------------------------------------------
    def view(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The node and its pods, with our own record writes laid over a cache that has not caught up."""
        return self.nodes.get("", self.settings.node_name), self.memory.overlay(self.pods.list())

    def step(self) -> float:
        """Decide and act once; returns how long the loop may sleep if nothing changes."""
        self.steps += 1
        now = self.clock()
        node, pods = self.view()
        metrics.set_pod_counts(state_counts(pods))
        actions = decide(node, pods, self.settings, self.memory.hints(pods, now, self.limiter))
        self.execute(actions)
        return self.memory.next_wake(self.clock(), bool(actions), self.resync_seconds, self.limiter)

    def execute(self, actions: list[Action]) -> None:
        self.executor.execute(actions)
