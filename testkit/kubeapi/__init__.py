"""A Kubernetes API server for tests: in-process, real HTTP on 127.0.0.1, real chunked watch streams.

    from testkit.kubeapi import KubeAPIServer

    with KubeAPIServer() as api:                       # starts on a free port; stops on exit
        client = api.api_client()                      # a real kubernetes.client.ApiClient
        api.kubeconfig(tmp_path / "kubeconfig")        # the same, for a subprocess (`--kubeconfig F`)
        api.create("priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
        api.create("pods", pod, namespace="default")   # also update / delete / get / list

What it serves, for every registered resource (priorityclasses, pods, nodes, namespaces, events in both
groups, poddisruptionbudgets; `register_resource(ResourceType(...))` adds more), cluster-scoped or
namespaced: LIST (with `metadata.resourceVersion`, `fieldSelector`, `labelSelector`), GET, POST, PUT
(optimistic concurrency on `metadata.resourceVersion`), PATCH (merge, strategic-merge treated as merge,
json-patch), DELETE (see `testkit.kubeapi.storage` for grace-period semantics) and WATCH (`?watch=1`: chunked
JSON lines from `resourceVersion`, `allowWatchBookmarks` → a BOOKMARK every `bookmark_interval` seconds,
`timeoutSeconds`, selectors applied to events the way the API server's cacher does: an object entering
the selector is ADDED, one leaving it is DELETED). A watch from a compacted resourceVersion gets an ERROR
event carrying a 410 `Expired` Status (or HTTP 410 with `gone_as_http=True`). Like the real API server it
starts with the two system PriorityClasses (`system_priority_classes=False` to start empty), and sets
the `kubernetes.io/metadata.name` label of every Namespace written, as it does. With
`token="..."` every request needs `Authorization: Bearer <token>` (401 otherwise). With `tls=True` it
serves HTTPS under a private CA, and with `client_certificates=True` it also requires a client certificate
signed by that CA; `api_client()` and `kubeconfig()` carry the CA and the client certificate.

LIST serves the latest state whatever `resourceVersion` it is given (valid for the default "not older
than" semantics) and ignores `limit` / `continue` (no pagination).

Fault hooks: `fail_next(n, status=500, match=None)` / `with api.failing(500, match=None):` (`match` gets
the RequestRecord: e.g. `lambda r: r.watch` fails only watches), `stall()` / `release()` /
`with api.stalled():` (connections are accepted, nothing is sent, open watches go silent),
`drop_watches()` (cut every open stream mid-chunk), `expire_watches()` (compact + ERROR 410 on every
open stream), `compact()` (the next watch from an older version gets 410). `api.requests` logs every
request (method, path, query, status, watch); `watch_count()`, `list_count()`, `open_watches` help.

Extending with a subresource (e.g. the eviction API):

    def evict(request: Request) -> tuple[int, Any]:      # raise ApiError(429, ...) for a Status answer
        request.server.delete("pods", request.name, request.namespace)
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    api.register_subresource("pods", "eviction", "POST", evict)

The handler gets a `Request` (server, method, resource, namespace, name, subresource, query, headers,
parsed JSON body) and returns `(status, json_body)`; the in-process helpers and `request.server.storage`
give it the objects.
"""

from testkit.kubeapi.resources import DEFAULT_RESOURCES, ROTATION_RESOURCES, ResourceType
from testkit.kubeapi.server import KubeAPIServer, Request, RequestRecord, SubresourceHandler
from testkit.kubeapi.storage import ApiError

__all__ = [
    "DEFAULT_RESOURCES",
    "ROTATION_RESOURCES",
    "ApiError",
    "KubeAPIServer",
    "Request",
    "RequestRecord",
    "ResourceType",
    "SubresourceHandler",
]
