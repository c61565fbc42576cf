"""The node of a pod, read from the API server when the sidecar asks to evict it (`PodNodes`).

The eviction check (webhook/policy/eviction_rules.py) needs the evicted pod's spec.nodeName, which the
Eviction under review does not carry. One GET of the pod per eviction: only the sidecar's evictions are
sent to the webhook, a few per preemption, so a pod cache (a cluster-wide watch of every pod) would cost
far more than it saves. The answer stays raw JSON (webhook.kube.rest); the timeout is short so a slow
API server fails the review well within the webhook's own timeoutSeconds (the API server then applies
failurePolicy Fail: the eviction waits).
"""

from __future__ import annotations

from webhook.kube import rest
from webhook.policy.eviction_rules import PodLookupError

LOOKUP_TIMEOUT = 3.0


class ClusterPodNodes:
    """`PodNodes` backed by a GET of the pod."""

    def __init__(self, api_client: rest.Client, *, timeout: float = LOOKUP_TIMEOUT) -> None:
        self._api = api_client
        self._timeout = timeout

    def node_of(self, namespace: str, name: str) -> str | None:
        try:
            pod = rest.call_json(self._api, "GET", rest.pod_path(namespace, name), timeout=self._timeout)
        except rest.ApiError as err:
            if err.status == 404:
                return None
            raise PodLookupError(
                f"reading pod {namespace}/{name}: HTTP {err.status} {err.http_reason}"
            ) from None
        except rest.Unreachable as err:
            raise PodLookupError(f"reading pod {namespace}/{name}: {err.kind}") from None
        except rest.NotJSON as err:
            raise PodLookupError(f"reading pod {namespace}/{name}: {err}") from None
        spec = pod.get("spec") if isinstance(pod, dict) else None
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        return node if isinstance(node, str) else ""

    def close(self) -> None:
        self._api.close()
