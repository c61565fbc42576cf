"""One admission path's `answer(content type, body) -> (status, JSON body)`: the only code that turns a
request body into an AdmissionReview answer, whoever carries the HTTP.

Two callers, one decision: the Flask view (webhook.server.app: tests, any WSGI server) and the serving
worker, which answers a small review on its event loop as soon as the body is read (webhook.server.worker)
instead of handing it to a pool thread and back. That hand-off and Flask's request machinery were half of
what a review cost the server (docs/performance.md, "Ours against the floor"). A review that must wait
(the class cache's first sync, an eviction's pod lookup from the API server, a namespace not cached yet)
never waits on the loop:
`answer_on_loop` returns None for it before deciding anything, and the worker runs it in a thread through
the WSGI app.

No Flask here: the worker calls this without a request context.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook import json_codec
from webhook.k8s import OPERATIONS
from webhook.policy.class_model import ClassStore
from webhook.policy.eviction_rules import PodLookupError, PodNodes
from webhook.policy.namespace_access import NO_NAMESPACES, LabelsUnavailable, NamespaceLabels
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.review import MalformedReview, Stage, handle_review
from webhook.review.routes import LABELS
from webhook.server import metrics
from webhook.server.limits import JSON, error_body
from webhook.server.store import NamespaceCache

# How long a review waits for a cluster store's first LIST before it is refused with 503, which makes the
# API server apply the webhook's failurePolicy. Well below the webhook's timeoutSeconds.
READY_WAIT = 2.0
# Largest body answered on the event loop. Parsing and deciding a review is linear in its size: a pod as
# the API server sends it is a few KiB (about 0.1 ms); an UPDATE of a 3 MiB object would hold every other
# connection of the worker for tens of milliseconds, so it goes to a thread.
ON_LOOP_MAX_BYTES = 64 * 1024
# How long a review whose class has a rule waits for a namespace the Namespace cache has not seen yet
# (created a moment before the pod; the watch event is usually milliseconds behind), or for the cache's first
# LIST while no attempt has failed yet. Past it the labels are unknown and the rule refuses (or warns).
NAMESPACE_WAIT = 1.0
# The cause given when the Namespace cache's first LIST has not been answered within NAMESPACE_WAIT.
NOT_LISTED = "the namespaces are not listed yet (the API server has not answered the webhook's LIST)"
EVICTION_RESOURCE = "pods/eviction"  # the metric label of the sidecar's evictions (/validate)
# Metric label values come from the request; only these are kept as they are (bounded cardinality).
KNOWN_RESOURCES = LABELS  # one per route (webhook/review/routes.py)
KNOWN_OPERATIONS = frozenset(OPERATIONS)

Answer = tuple[int, bytes]


class NotReady(RuntimeError):
    """No class state yet: an empty set would give every pod priority 0 and refuse every named class."""


class BadRequest(ValueError):
    """The request cannot be an AdmissionReview; the message is one line naming what is wrong."""


class _NeedsThread(Exception):
    """Raised inside a decision started on the event loop when it would block (a pod lookup)."""


class _NoLookupOnLoop:
    """`PodNodes` for a decision on the event loop: a lookup is network I/O, so the review starts over in a
    thread (a decision reads nothing else from outside, so starting over changes nothing)."""

    def node_of(self, namespace: str, name: str) -> str | None:
        raise _NeedsThread


_NO_LOOKUP = _NoLookupOnLoop()


@dataclass(frozen=True)
class _CachedNamespaces:
    """`NamespaceLabels` from the cache, asked only for a class with a rule. On the event loop a namespace
    not cached yet sends the review to a thread; there it is waited for, at most `wait` seconds in all
    (the cache's first LIST included). A cache that cannot list namespaces (its last attempt failed) is
    not waited for: the rule cannot be evaluated, and the review says why at once (LabelsUnavailable)."""

    cache: NamespaceCache
    on_loop: bool
    wait: float = NAMESPACE_WAIT

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        labels = self.cache.labels_of(namespace)
        if labels is not None:
            return labels
        listed = self.cache.ready()
        if not listed:
            cause = self.cache.failure()
            if cause is not None:
                raise LabelsUnavailable(cause)
        if self.on_loop:
            raise _NeedsThread
        if listed:
            return self.cache.wait_for(namespace, self.wait)
        started = time.monotonic()
        if not self.cache.wait_ready(self.wait):
            raise LabelsUnavailable(self.cache.failure() or NOT_LISTED)
        return self.cache.wait_for(namespace, max(0.0, self.wait - (time.monotonic() - started)))


def check_content_type(content_type: str | None) -> None:
    mimetype = (content_type or "").split(";", 1)[0].strip().lower()
    if mimetype != JSON:
        raise BadRequest(f"Content-Type: must be {JSON}, got {content_type or 'none'!r}")


def parse_json(data: bytes) -> Any:
    """The body of every review, parsed with webhook.json_codec (orjson where installed: a third of the
    standard library's cost). The message names the place, not the engine's words, so that both engines
    answer a malformed body alike."""
    if not data:
        raise BadRequest("body: empty, expected an AdmissionReview")
    try:
        return json_codec.loads(data)
    except json_codec.DecodeError as err:
        detail = str(err).splitlines()[0] if str(err) else "unreadable"
        if "depth limit" in detail or "recursion" in detail:
            raise BadRequest("body: JSON nested too deeply") from None
        if "UTF-8" in detail:
            raise BadRequest("body: not UTF-8") from None
        raise BadRequest(f"body: not valid JSON at line {err.lineno} column {err.colno}") from None


def _label(value: str, known: frozenset[str]) -> str:
    return value if value in known else "other"


@dataclass(frozen=True)
class ReviewEndpoint:
    """/mutate or /validate. `store` is read once per review (a snapshot); `pods` looks up an evicted
    pod's node, `namespaces` gives the labels of a pod's namespace (both cluster mode only)."""

    stage: Stage
    store: ClassStore
    options: PodOptions = DEFAULT_POD_OPTIONS
    ready_wait: float = READY_WAIT
    pods: PodNodes | None = None
    namespaces: NamespaceCache | None = None

    @property
    def path(self) -> str:
        return f"/{self.stage.value}"

    def answer(self, content_type: str | None, read_body: Callable[[], bytes]) -> Answer:
        """The status and JSON body for one request; every answer is counted in the metrics, errors
        included."""
        answered = self._answer(content_type, read_body, on_loop=False)
        assert answered is not None  # only a decision on the loop is handed on
        return answered

    def answer_on_loop(self, content_type: str | None, body: bytes) -> Answer | None:
        """The same on the event loop, or None when the review must run in a thread (too large to decide
        without holding up the loop's other connections, or it would wait)."""
        if len(body) > ON_LOOP_MAX_BYTES or not self.store.ready():
            return None
        return self._answer(content_type, lambda: body, on_loop=True)

    def _answer(
        self, content_type: str | None, read_body: Callable[[], bytes], *, on_loop: bool
    ) -> Answer | None:
        started = time.perf_counter()
        operation = resource = "unknown"
        result = "error"
        try:
            check_content_type(content_type)
            body = parse_json(read_body())
            self._wait_ready()
            pods = _NO_LOOKUP if on_loop and self.pods is not None else self.pods
            namespaces = self._loop_namespaces if on_loop else self._thread_namespaces
            review, req, decision = handle_review(
                body, self.stage, self.store.snapshot(), self.options, pods, namespaces
            )
            operation = _label(req.operation, KNOWN_OPERATIONS)
            full = f"{req.resource}/{req.sub_resource}" if req.sub_resource else req.resource
            resource = _label(full, KNOWN_RESOURCES)
            result = "allowed" if decision.allowed else "denied"
            if decision.unresolved:
                metrics.UNRESOLVED_PODS.inc()
            if decision.rule_class:
                metrics.NAMESPACE_RULE.labels(
                    decision.rule_class, "warned" if decision.allowed else "denied"
                ).inc()
            return 200, json_codec.dumps(review)
        except _NeedsThread:
            result = ""  # not answered here: the thread that answers it counts it
            return None
        except (BadRequest, MalformedReview) as err:
            return 400, error_body(str(err))
        except PodLookupError as err:  # only an eviction's check looks a pod up
            operation, resource, result = "CREATE", EVICTION_RESOURCE, "unavailable"
            return 503, error_body(str(err))
        except NotReady as err:
            result = "unavailable"
            return 503, error_body(str(err))
        finally:
            # Also on an unexpected exception (answered 500 by the caller), so errors are counted.
            if result:
                metrics.observe(self.stage.value, operation, resource, result, time.perf_counter() - started)

    @functools.cached_property
    def _loop_namespaces(self) -> NamespaceLabels:
        return NO_NAMESPACES if self.namespaces is None else _CachedNamespaces(self.namespaces, on_loop=True)

    @functools.cached_property
    def _thread_namespaces(self) -> NamespaceLabels:
        return NO_NAMESPACES if self.namespaces is None else _CachedNamespaces(self.namespaces, on_loop=False)

    def _wait_ready(self) -> None:
        """The class cache's first sync, within `ready_wait`; NotReady past it. The Namespace cache is never
        waited for here: only a class with a rule reads it (`_CachedNamespaces`)."""
        if not self.store.wait_ready(self.ready_wait):
            raise NotReady("PriorityClasses not synced yet: answering now would misjudge every pod")


def endpoints(
    store: ClassStore,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    *,
    ready_wait: float = READY_WAIT,
    pods: PodNodes | None = None,
    namespaces: NamespaceCache | None = None,
) -> dict[str, ReviewEndpoint]:
    """Both admission paths, by URL path."""
    made = (
        ReviewEndpoint(stage, store, options, ready_wait, pods, namespaces)
        for stage in (Stage.MUTATE, Stage.VALIDATE)
    )
    return {endpoint.path: endpoint for endpoint in made}
