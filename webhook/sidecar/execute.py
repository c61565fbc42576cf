"""Carrying out what `decide` asked for, through the API: record writes, events, evictions and deletes.

Each action is done as the kubelet would (its Preempting event before the kill, the victim's own grace
period), and its outcome is remembered (webhook.sidecar.memory) for the next pass: an accepted eviction,
the backoff after a refused one, a report made. A rejected pod whose record cannot be written gets nothing
more in that pass: the record write, guarded by a resourceVersion test, is what makes acting on a stale
view impossible.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from webhook.kube import eviction, rest
from webhook.kube.events import NORMAL, WARNING, EventRecorder
from webhook.sidecar import metrics
from webhook.sidecar import record as rec
from webhook.sidecar.actions import Action, Announce, DryRun, Evict, Recreate, Report, WriteRecord, ref, uid
from webhook.sidecar.memory import Memory
from webhook.sidecar.ratelimit import EvictionRateLimit

log = logging.getLogger("webhook.sidecar")

PREEMPTING = "Preempting"  # pkg/kubelet/events: PreemptContainer
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"  # pkg/kubelet/preemption: message


class Executor:
    def __init__(
        self,
        api_client: rest.Client,
        events: EventRecorder,
        limiter: EvictionRateLimit,
        memory: Memory,
        *,
        ignore_pdb: bool,
        backoff_initial: float,
        backoff_max: float,
        clock: Callable[[], float],
    ) -> None:
        self.api_client = api_client
        self.events = events
        self.limiter = limiter
        self.memory = memory
        self.ignore_pdb = ignore_pdb
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.clock = clock

    def execute(self, actions: list[Action]) -> None:
        failed: set[str] = set()  # rejected pods whose record could not be written: do nothing more for them
        for action in actions:
            if uid(action.pod) in failed:
                continue
            if isinstance(action, WriteRecord):
                if not self.write_record(action.pod, action.record):
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

    def write_record(self, pod: Mapping[str, Any], record: rec.Record) -> bool:
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
                if key not in self.memory.reported:
                    self.memory.reported[key] = uid(pod)
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
            self.memory.written[uid(pod)] = updated
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
        if victim_uid not in self.memory.victim_evented:  # the kubelet records the event before the kill
            self.memory.victim_evented.add(victim_uid)
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
            self.memory.blocked.pop(victim_uid, None)
            if outcome.ok:
                self.memory.evicting[victim_uid] = now
                metrics.PREEMPTIONS.labels(resource=action.resource).inc()
            log.info(
                "preempted %s to admit %s (%s)",
                ref(victim),
                ref(action.pod),
                outcome.reason if outcome.ok else "already gone",
            )
            return
        metrics.EVICTION_FAILURES.labels(reason=outcome.reason).inc()
        attempts = self.memory.blocked.get(victim_uid, (0.0, 0))[1] + 1
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (attempts - 1))
        self.memory.blocked[victim_uid] = (now + delay, attempts)
        what = (
            "refused by its PodDisruptionBudget" if outcome.blocked_by_pdb else f"failed ({outcome.reason})"
        )
        message = f"Eviction of {ref(victim)} {what}: {outcome.message}; retrying"
        log.warning("%s: %s (attempt %d, next in %.1fs)", ref(action.pod), message, attempts, delay)
        key = f"evict-failed/{uid(action.pod)}/{victim_uid}/{outcome.reason}"
        if key not in self.memory.reported:
            self.memory.reported[key] = uid(action.pod)
            self.events.record(action.pod, WARNING, "EvictionFailed", message, key=key)

    def _dry_run(self, action: DryRun) -> None:
        self.memory.reported[action.key] = uid(action.pod)
        names = ", ".join(ref(v) for v in action.victims)
        message = f"Dry run: would preempt {len(action.victims)} pod(s) ({action.resource}): {names}"
        log.info("%s: %s", ref(action.pod), message)
        metrics.DRY_RUN_VICTIMS.labels(resource=action.resource).inc(len(action.victims))
        self.events.record(action.pod, NORMAL, "PreemptionDryRun", message, key=action.key)

    def _report(self, action: Report) -> None:
        self.memory.reported[action.key] = uid(action.pod)
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
