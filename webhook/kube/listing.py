"""Listing a cluster's nodes, pods, PDBs and PriorityClasses for `plan --kubeconfig`: read-only, paged.

Each resource is listed with `limit`/`continue` (as kubectl does, 500 objects a page), so neither the API
server nor this process ever holds more than a page of raw JSON; objects are handed out one at a time in
the order `kubectl get nodes,pods,pdb,pc -A -o json` prints them, with the `kind` a List's items lack.
Answers are read as raw JSON (webhook.kube.rest), never as the client's model classes: a model object per
pod would cost more than the whole plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from webhook.kube import rest

PAGE_SIZE = 500
TIMEOUT = (10, 120)  # connect, read (s): a page of 500 pods is served in well under a second


@dataclass(frozen=True)
class Resource:
    path: str
    kind: str
    plural: str


RESOURCES = (
    Resource(rest.collection(rest.CORE_V1, "nodes"), "Node", "nodes"),
    Resource(rest.collection(rest.CORE_V1, "pods"), "Pod", "pods"),
    Resource(
        rest.collection(rest.POLICY_V1, "poddisruptionbudgets"), "PodDisruptionBudget", "poddisruptionbudgets"
    ),
    Resource(rest.collection(rest.SCHEDULING_V1, "priorityclasses"), "PriorityClass", "priorityclasses"),
)

Progress = Callable[[str, int], None]  # (plural, objects listed so far)


class ListError(Exception):
    """The API server refused or failed a list; the message names the resource and the reason."""


def list_objects(
    client: rest.Client, progress: Progress | None = None, page_size: int = PAGE_SIZE
) -> Iterator[tuple[str, Any]]:
    """(source, object) for every node, pod, PDB and PriorityClass of the cluster."""
    for resource in RESOURCES:
        count = 0
        for obj in _pages(client, resource, page_size):
            count += 1
            if isinstance(obj, dict):
                obj.setdefault("kind", resource.kind)
            yield f"{resource.plural}: item {count}", obj
            if progress and count % page_size == 0:
                progress(resource.plural, count)
        if progress:
            progress(resource.plural, count)


def _pages(client: rest.Client, resource: Resource, page_size: int) -> Iterator[Any]:
    token = ""
    while True:
        query = {"limit": str(page_size)}
        if token:
            query["continue"] = token
        body = _get(client, resource.path, query, resource.plural)
        items = body.get("items")
        if not isinstance(items, list):
            raise ListError(f"listing {resource.plural}: the answer has no items list")
        for i in range(len(items)):
            obj, items[i] = items[i], None
            yield obj
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def _get(client: rest.Client, path: str, query: dict[str, str], plural: str) -> dict[str, Any]:
    """One GET of a page (webhook.kube.rest: the connection's authentication, TLS and proxies)."""
    try:
        body = rest.call_json(client, "GET", path, query=query, timeout=TIMEOUT)
    except rest.ApiError as err:
        raise ListError(f"listing {plural}: {err.status} {err.summary}") from None
    except rest.Unreachable as err:
        raise ListError(f"listing {plural}: {err.kind}: {str(err).splitlines()[0]}") from None
    except rest.NotJSON as err:
        raise ListError(f"listing {plural}: {err}") from None
    if not isinstance(body, dict):
        raise ListError(f"listing {plural}: the answer is not a List")
    return body
