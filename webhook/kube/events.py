"""Recording core/v1 Events the way the kubelet's recorder does (reason, message, type, source).

Events are best effort, as in client-go's recorder: a failure is logged and never stops the caller.

An event that must be made once (one `Preempting` per victim, one `EvictionFailed` per victim and reason)
is given a `key`: its name is then derived from the key instead of the clock, so a second create of the
same event (by a restarted process, which has forgotten what it recorded) is refused by the API server
with `409 AlreadyExists` and nothing is duplicated. The API server itself is the memory, with no extra
request and no permission beyond `create`; it lasts as long as the event (the API server's `--event-ttl`,
one hour by default).
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from webhook.kube import rest

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024  # the API server rejects longer event messages


def _timestamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


MAX_NAME = 253


def event_name(obj_name: str, component: str, key: str | None) -> str:
    """`<object>.<hex nanoseconds>` like client-go's recorder; with a key, `<object>.<16 hex of its hash>`,
    the same for every process that records the same event."""
    suffix = (
        f"{time.time_ns():x}"
        if key is None
        else hashlib.sha256(f"{component}\0{key}".encode()).hexdigest()[:16]
    )
    return f"{obj_name[: MAX_NAME - len(suffix) - 1]}.{suffix}"


def event_body(
    obj: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str,
    key: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about `obj`; see `event_name` for its name."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = _timestamp()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(str(meta.get("name") or "unknown"), component, key),
            "namespace": namespace,
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion") or "v1",
            "kind": obj.get("kind") or "Pod",
            "namespace": namespace,
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component, "host": host},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }


class EventRecorder:
    def __init__(self, api_client: rest.Client, *, component: str, host: str) -> None:
        self.api_client = api_client
        self.component = component
        self.host = host

    def record(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *, key: str | None = None
    ) -> bool:
        """Create the event; False (logged) if the API refused it. With a `key`, an event already recorded
        under that key (by this process or an earlier one) is not recorded again, and True is returned."""
        body = event_body(obj, type_, reason, message, component=self.component, host=self.host, key=key)
        namespace = body["metadata"]["namespace"]
        try:
            rest.call_json(self.api_client, "POST", rest.collection(rest.CORE_V1, "events", namespace), body)
        except rest.ApiError as err:
            if key is not None and err.status == 409:
                log.debug(
                    "event %s on %s/%s was recorded before", reason, namespace, body["metadata"]["name"]
                )
                return True
            self._failed(reason, body, err)
            return False
        except rest.RestError as err:
            self._failed(reason, body, err)
            return False
        return True

    @staticmethod
    def _failed(reason: str, body: Mapping[str, Any], err: Exception) -> None:
        log.warning(
            "could not record event %s on %s/%s: %s",
            reason,
            body["metadata"]["namespace"],
            body["involvedObject"]["name"],
            " ".join(str(err).split())[:200],
        )
