"""The sidecar's loop: keep the node view, ask `decide` what to do, carry it out.

Two reflectors (the Node by name, the pods bound to it in all namespaces) fill two caches; every change
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

from kubernetes.client import ApiClient

from webhook.kube import eviction, rest
from webhook.kube.cache import ObjectCache
from webhook.kube.events import NORMAL, WARNING, EventRecorder
from webhook.kube.reflector import Reflector
from webhook.sidecar import metrics
from webhook.sidecar import record as rec
from webhook.sidecar.decide import (
    Action,
    Announce,
    DryRun,
    Evict,
    Hints,
    Recreate,
    Report,
    Settings,
    WriteRecord,
    decide,
    ref,
    uid,
)
from webhook.sidecar.lifecycle import TERMINATED, TERMINATING, lifecycle_state, state_counts
from webhook.sidecar.ratelimit import EvictionRateLimit

log = logging.getLogger("webhook.sidecar")

COMPONENT = "priority-webhook-sidecar"
PREEMPTING = "Preempting"  # pkg/kubelet/events: PreemptContainer
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"  # pkg/kubelet/preemption: message
EVICTING_TTL = 300.0  # seconds an accepted eviction may take to show in the view


def _rv(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class Sidecar:
    def __init__(
        self,
        api_client: ApiClient,
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
                **options,
            ),
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.nodes.add_listener(self._changed)
        self.pods.add_listener(self._changed)
        # hints (see decide.Hints); only the loop thread touches them
        self._evicting: dict[str, float] = {}
        self._blocked: dict[str, tuple[float, int]] = {}
        self._reported: dict[str, str] = {}  # report key -> uid of the rejected pod it is about
        self._victim_evented: set[str] = set()
        self._written: dict[str, dict[str, Any]] = {}
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
        node = self.nodes.get("", self.settings.node_name)
        pods = []
        for pod in self.pods.list():
            written = self._written.get(uid(pod))
            if written is not None:
                if _rv(written) > _rv(pod):
                    pod = written
                else:
                    del self._written[uid(pod)]
            pods.append(pod)
        return node, pods

    def _forget_gone(self, present: set[str], now: float) -> None:
        """Drop what the process remembers about pods no longer on the node, so memory stays bounded."""
        for table in (self._written, self._blocked):
            for key in [k for k in table if k not in present]:
                del table[key]
        self._victim_evented &= present
        for key in [k for k, owner in self._reported.items() if owner not in present]:
            del self._reported[key]
        for victim, since in list(self._evicting.items()):
            if now - since > EVICTING_TTL:  # accepted but never shown terminating: let decide see it again
                del self._evicting[victim]

    def hints(self, pods: list[dict[str, Any]], now: float) -> Hints:
        by_uid = {uid(p): p for p in pods}
        self._forget_gone(set(by_uid), now)
        for victim in list(self._evicting):  # forget once the view shows the eviction (or the pod is gone)
            pod = by_uid.get(victim)
            if pod is None or lifecycle_state(pod) in (TERMINATING, TERMINATED):
                del self._evicting[victim]
        return Hints(
            now=now,
            eviction_budget=self.limiter.available(now),
            evicting=frozenset(self._evicting),
            blocked_until={k: until for k, (until, _) in self._blocked.items()},
            reported=frozenset(self._reported),
            wall_time=time.time(),
        )

    def step(self) -> float:
        """Decide and act once; returns how long the loop may sleep if nothing changes."""
        self.steps += 1
        now = self.clock()
        node, pods = self.view()
        metrics.set_pod_counts(state_counts(pods))
        actions = decide(node, pods, self.settings, self.hints(pods, now))
        self.execute(actions)
        return self._next_wake(self.clock(), bool(actions))

    def _next_wake(self, now: float, acted: bool) -> float:
        wake = self.resync_seconds
        for until, _ in self._blocked.values():
            if until > now:
                wake = min(wake, until - now)
        if self.limiter.available(now) <= 0:
            wake = min(wake, self.limiter.next_free(now) - now)
        if self._evicting or acted:
            wake = min(wake, 1.0)
        return max(0.05, wake)

    def execute(self, actions: list[Action]) -> None:
        failed: set[str] = set()  # rejected pods whose record could not be written: do nothing more for them
        for action in actions:
            if uid(action.pod) in failed:
                continue
            if isinstance(action, WriteRecord):
                if not self._write_record(action.pod, action.record):
                    failed.add(uid(action.pod))
            elif isinstance(action, Announce):
                self._announce(action)
            elif isinstance(action, Evict):
                self._evict(action)
            elif isinstance(action, DryRun):
                self._dry_run(action)
            elif isinstance(action, Report):
                self._report(action)
            elif isinstance(action, Recreate):
                self._recreate(action)

    # -- actions ------------------------------------------------------------------------------------
    def _write_record(self, pod: Mapping[str, Any], record: rec.Record) -> bool:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations")
        value = record.to_annotation()
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        ]
        if isinstance(annotations, Mapping):
            key = rec.ANNOTATION.replace("~", "~0").replace("/", "~1")
            ops.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": value})
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {rec.ANNOTATION: value}})
        path = rest.pod_path(str(meta.get("namespace")), str(meta.get("name")))
        try:
            updated = rest.call_json(
                self.api_client, "PATCH", path, ops, content_type="application/json-patch+json"
            )
        except rest.ApiError as err:
            if err.status == 403:  # RBAC without patch on pods: say so once, loudly, instead of every pass
                key = "forbidden-record"
                if key not in self._reported:
                    self._reported[key] = uid(pod)
                    message = (
                        "Cannot record preemption state on this pod: the sidecar may not patch pods "
                        "(grant patch on pods, or run with --dry-run); nothing will be evicted"
                    )
                    log.error("%s: %s", ref(pod), message)
                    self.events.record(
                        pod, WARNING, "PreemptionFailed", message, key=f"forbidden-record/{uid(pod)}"
                    )
                return False
            # 422: the pod changed since this view (or is gone); the watch brings the new version.
            log.info(
                "not recording preemption state on %s (%s); will re-evaluate",
                ref(pod),
                err.reason,
            )
            return False
        except rest.RestError as err:
            log.warning("could not record preemption state on %s: %s", ref(pod), err)
            return False
        if isinstance(updated, dict):
            self._written[uid(pod)] = updated
        log.info("preemption state of %s: %s", ref(pod), value)
        return True

    def _announce(self, action: Announce) -> None:
        names = ", ".join(ref(v) for v in action.victims)
        metrics.VICTIMS_PER_PREEMPTION.observe(len(action.victims))
        message = (
            f"Preempting {len(action.victims)} pod(s) to make room for this pod ({action.resource}): {names}"
        )
        log.info("%s: %s", ref(action.pod), message)
        victims = ",".join(sorted(uid(v) for v in action.victims))
        self.events.record(
            action.pod, NORMAL, PREEMPTING, message, key=f"announce/{uid(action.pod)}/{victims}"
        )

    def _evict(self, action: Evict) -> None:
        victim, victim_uid = action.victim, uid(action.victim)
        now = self.clock()
        if not self.limiter.take(now):
            return
        if victim_uid not in self._victim_evented:  # the kubelet records the event before the kill
            self._victim_evented.add(victim_uid)
            self.events.record(victim, WARNING, PREEMPTING, PREEMPTED_MESSAGE, key=f"preempting/{victim_uid}")
        meta = victim.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        if self.ignore_pdb:
            outcome = eviction.delete(
                self.api_client,
                namespace,
                name,
                victim_uid,
                grace_period_seconds=eviction.own_grace_period(dict(victim)),
            )
        else:
            outcome = eviction.evict(self.api_client, namespace, name, victim_uid)
        if outcome.ok or outcome.gone:
            self._blocked.pop(victim_uid, None)
            if outcome.ok:
                self._evicting[victim_uid] = now
                metrics.PREEMPTIONS.labels(resource=action.resource).inc()
            log.info(
                "preempted %s to admit %s (%s)",
                ref(victim),
                ref(action.pod),
                outcome.reason if outcome.ok else "already gone",
            )
            return
        metrics.EVICTION_FAILURES.labels(reason=outcome.reason).inc()
        attempts = self._blocked.get(victim_uid, (0.0, 0))[1] + 1
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (attempts - 1))
        self._blocked[victim_uid] = (now + delay, attempts)
        what = (
            "refused by its PodDisruptionBudget" if outcome.blocked_by_pdb else f"failed ({outcome.reason})"
        )
        message = f"Eviction of {ref(victim)} {what}: {outcome.message}; retrying"
        log.warning("%s: %s (attempt %d, next in %.1fs)", ref(action.pod), message, attempts, delay)
        key = f"evict-failed/{uid(action.pod)}/{victim_uid}/{outcome.reason}"
        if key not in self._reported:
            self._reported[key] = uid(action.pod)
            self.events.record(action.pod, WARNING, "EvictionFailed", message, key=key)

    def _dry_run(self, action: DryRun) -> None:
        self._reported[action.key] = uid(action.pod)
        names = ", ".join(ref(v) for v in action.victims)
        message = f"Dry run: would preempt {len(action.victims)} pod(s) ({action.resource}): {names}"
        log.info("%s: %s", ref(action.pod), message)
        metrics.DRY_RUN_VICTIMS.labels(resource=action.resource).inc(len(action.victims))
        self.events.record(action.pod, NORMAL, "PreemptionDryRun", message, key=action.key)

    def _report(self, action: Report) -> None:
        self._reported[action.key] = uid(action.pod)
        level = logging.WARNING if action.type == WARNING else logging.INFO
        log.log(level, "%s: %s: %s", ref(action.pod), action.reason, action.message)
        self.events.record(action.pod, action.type, action.reason, action.message, key=action.key)

    def _recreate(self, action: Recreate) -> None:
        pod = action.pod
        meta = pod.get("metadata") or {}
        self.events.record(
            pod,
            NORMAL,
            "Recreating",
            "Room was made; deleting this rejected pod so its controller recreates it",
            key=f"recreate/{uid(pod)}",
        )
        outcome = eviction.delete(
            self.api_client,
            str(meta.get("namespace")),
            str(meta.get("name")),
            uid(pod),
            grace_period_seconds=eviction.own_grace_period(dict(pod)),
        )
        if outcome.ok or outcome.gone:
            log.info("deleted rejected pod %s for its controller to recreate", ref(pod))
        else:
            log.warning("could not delete rejected pod %s: %s %s", ref(pod), outcome.reason, outcome.message)
