"""What the agent remembers between passes: the hints `decide` is given, never the durable state.

The durable state is the record on each rejected pod (webhook.sidecar.record); this is what a restart may
forget at no cost: evictions just accepted (so a victim is not evicted twice before the view shows it
terminating), retry backoff after a refused eviction, reports and events already made, and our own record
writes while the cache has not caught up with them. It is bounded by the node's pods: what concerns a pod
no longer on the node is dropped. Only the loop thread touches it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.sidecar.actions import Hints, uid
from webhook.sidecar.lifecycle import TERMINATED, TERMINATING, lifecycle_state
from webhook.sidecar.ratelimit import EvictionRateLimit

EVICTING_TTL = 300.0  # seconds an accepted eviction may take to show in the view


def _rv(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass
class Memory:
    evicting: dict[str, float] = field(default_factory=dict)  # victim uid -> when its eviction was accepted
    blocked: dict[str, tuple[float, int]] = field(default_factory=dict)  # victim uid -> (retry at, attempts)
    reported: dict[str, str] = field(
        default_factory=dict
    )  # report key -> uid of the rejected pod it is about
    victim_evented: set[str] = field(default_factory=set)  # victims whose Preempting event was recorded
    written: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod uid -> the pod our write returned

    def overlay(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The pods, with our own record writes laid over a cache that has not caught up with them."""
        out = []
        for pod in pods:
            written = self.written.get(uid(pod))
            if written is not None:
                if _rv(written) > _rv(pod):
                    pod = written
                else:
                    del self.written[uid(pod)]
            out.append(pod)
        return out

    def forget_gone(self, present: set[str], now: float) -> None:
        """Drop what is remembered about pods no longer on the node, so memory stays bounded."""
        for table in (self.written, self.blocked):
            for key in [k for k in table if k not in present]:
                del table[key]
        self.victim_evented &= present
        for key in [k for k, owner in self.reported.items() if owner not in present]:
            del self.reported[key]
        for victim, since in list(self.evicting.items()):
            if now - since > EVICTING_TTL:  # accepted but never shown terminating: let decide see it again
                del self.evicting[victim]

    def hints(self, pods: list[dict[str, Any]], now: float, limiter: EvictionRateLimit) -> Hints:
        by_uid = {uid(p): p for p in pods}
        self.forget_gone(set(by_uid), now)
        for victim in list(self.evicting):  # forget once the view shows the eviction (or the pod is gone)
            pod = by_uid.get(victim)
            if pod is None or lifecycle_state(pod) in (TERMINATING, TERMINATED):
                del self.evicting[victim]
        return Hints(
            now=now,
            eviction_budget=limiter.available(now),
            evicting=frozenset(self.evicting),
            blocked_until={k: until for k, (until, _) in self.blocked.items()},
            reported=frozenset(self.reported),
            wall_time=time.time(),
        )

    def next_wake(self, now: float, acted: bool, resync_seconds: float, limiter: EvictionRateLimit) -> float:
        """How long the loop may sleep if nothing changes: until a backoff ends or the rate limit frees."""
        wake = resync_seconds
        for until, _ in self.blocked.values():
            if until > now:
                wake = min(wake, until - now)
        if limiter.available(now) <= 0:
            wake = min(wake, limiter.next_free(now) - now)
        if self.evicting or acted:
            wake = min(wake, 1.0)
        return max(0.05, wake)
