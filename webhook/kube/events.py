"""Recording core/v1 Events the way the kubelet's recorder does (reason, message, type, source).

Events are best effort, as in client-go's recorder: a failure is logged and never stops the caller.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from webhook.kube.eviction import call_json

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024  # the API server rejects longer event messages


def _timestamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    obj: Mapping[str, Any], type_: str, reason: str, message: str, *, component: str, host: str
) -> dict[str, Any]:
    """A core/v1 Event about `obj`, named `<object>.<hex nanoseconds>` like client-go's recorder."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = _timestamp()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'unknown')}.{time.time_ns():x}", "namespace": namespace},
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
    def __init__(self, api_client: ApiClient, *, component: str, host: str) -> None:
        self.api_client = api_client
        self.component = component
        self.host = host

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> bool:
        """Create the event; False (logged) if the API refused it."""
        body = event_body(obj, type_, reason, message, component=self.component, host=self.host)
        namespace = body["metadata"]["namespace"]
        try:
            call_json(self.api_client, "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", body)
        except (ApiException, OSError, HTTPError, ValueError) as err:
            log.warning(
                "could not record event %s on %s/%s: %s",
                reason,
                namespace,
                body["involvedObject"]["name"],
                " ".join(str(err).split())[:200],
            )
            return False
        return True
