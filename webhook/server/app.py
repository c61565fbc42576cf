"""The admission webhook's HTTP face: AdmissionReview in, AdmissionReview out, through `handle_review`.

Every answer is JSON. A body that is not a review we can answer gets 400 with a one-line
`{"error": "<field>: <problem>"}`; nothing, not even a bug, produces an HTML page or a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import IO, Any

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook.k8s import OPERATIONS
from webhook.policy.class_model import ClassStore
from webhook.policy.eviction_rules import PodLookupError, PodNodes
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.review import MalformedReview, Stage, handle_review
from webhook.review.routes import LABELS
from webhook.server import metrics
from webhook.server.limits import MAX_BODY_BYTES

log = logging.getLogger(__name__)

# How long a review waits for a cluster store's first LIST before it is refused with 503, which makes the
# API server apply the webhook's failurePolicy. Well below the webhook's timeoutSeconds.
READY_WAIT = 2.0
JSON = "application/json"
EVICTION_RESOURCE = "pods/eviction"  # the metric label of the sidecar's evictions (/validate)
# Metric label values come from the request; only these are kept as they are (bounded cardinality).
KNOWN_RESOURCES = LABELS  # one per route (webhook/review/routes.py)
KNOWN_OPERATIONS = frozenset(OPERATIONS)


class NotReady(RuntimeError):
    """No class state yet: an empty set would give every pod priority 0 and refuse every named class."""


class BadRequest(ValueError):
    """The request cannot be an AdmissionReview; the message is one line naming what is wrong."""


def json_response(payload: Any, status: int = 200) -> Response:
    body = orjson.dumps(payload)
    return Response(body, status=status, mimetype=JSON)


def error_response(message: str, status: int) -> Response:
    return json_response({"error": message}, status)


def read_body(environ: dict[str, Any], content_length: int | None) -> bytes:
    """The request body, refusing more than MAX_BODY_BYTES before reading it when the length is declared,
    and after at most MAX_BODY_BYTES + 1 bytes when it is not (chunked).

    The serving worker has already read the body whole and refused one over the limit; the checks here
    keep the app safe under any other WSGI server (Flask's test client; gthread in benchmark comparisons,
    where a socket timeout from the TLS context bounds each read and surfaces here as TimeoutError).
    """
    if content_length is not None and content_length > MAX_BODY_BYTES:
        raise BadRequest(f"body: {content_length} bytes is over the {MAX_BODY_BYTES}-byte limit")
    try:
        return _read(environ["wsgi.input"], content_length)
    except TimeoutError:
        raise BadRequest("body: stalled before its end") from None


def _read(stream: IO[bytes], content_length: int | None) -> bytes:
    if content_length is not None:
        return stream.read(content_length)
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BODY_BYTES:
        chunk = stream.read(min(65536, MAX_BODY_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > MAX_BODY_BYTES:
        raise BadRequest(f"body: over the {MAX_BODY_BYTES}-byte limit")
    return b"".join(chunks)


def check_content_type(content_type: str | None) -> None:
    mimetype = (content_type or "").split(";", 1)[0].strip().lower()
    if mimetype != JSON:
        raise BadRequest(f"Content-Type: must be {JSON}, got {content_type or 'none'!r}")


def parse_json(data: bytes) -> Any:
    """orjson: the body is parsed on every review, and it does so at a third of the stdlib's cost."""
    if not data:
        raise BadRequest("body: empty, expected an AdmissionReview")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        detail = str(err).splitlines()[0] if str(err) else "unreadable"
        if "depth limit" in detail or "recursion" in detail:
            raise BadRequest("body: JSON nested too deeply") from None
        if "UTF-8" in detail:
            raise BadRequest("body: not UTF-8") from None
        raise BadRequest(f"body: not valid JSON: {detail}") from None


def _label(value: str, known: frozenset[str]) -> str:
    return value if value in known else "other"


def review_view(
    stage: Stage,
    store: ClassStore,
    options: PodOptions,
    ready_wait: float,
    pods: PodNodes | None = None,
) -> Callable[[], Response]:
    webhook = stage.value

    def view() -> Response:
        started = time.perf_counter()
        operation = resource = "unknown"
        result = "error"
        try:
            check_content_type(request.content_type)
            body = parse_json(read_body(request.environ, request.content_length))
            if not store.wait_ready(ready_wait):
                raise NotReady("PriorityClasses not synced yet: answering now would misjudge every pod")
            review, req, decision = handle_review(body, stage, store.snapshot(), options, pods)
        except (BadRequest, MalformedReview) as err:
            response = error_response(str(err), 400)
        except PodLookupError as err:  # only an eviction's check looks a pod up
            operation, resource, result = "CREATE", EVICTION_RESOURCE, "unavailable"
            response = error_response(str(err), 503)
        except NotReady as err:
            result = "unavailable"
            response = error_response(str(err), 503)
        else:
            operation = _label(req.operation, KNOWN_OPERATIONS)
            full = f"{req.resource}/{req.sub_resource}" if req.sub_resource else req.resource
            resource = _label(full, KNOWN_RESOURCES)
            result = "allowed" if decision.allowed else "denied"
            if decision.unresolved:
                metrics.UNRESOLVED_PODS.inc()
            response = json_response(review)
        finally:
            # Also on an unexpected exception (then answered by the 500 handler), so errors are counted.
            metrics.observe(webhook, operation, resource, result, time.perf_counter() - started)
        return response

    view.__name__ = webhook
    return view


def create_app(
    store: ClassStore,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    *,
    ready_wait: float = READY_WAIT,
    pods: PodNodes | None = None,
) -> Flask:
    """The WSGI app for one worker; `store` is read once per review (a snapshot). A review waits only for
    a cluster store's first sync, at most `ready_wait` seconds, and is refused with 503 after that.
    `pods` looks up an evicted pod's node (cluster mode); a failed lookup is answered 503."""
    app = Flask(__name__)
    for stage in (Stage.MUTATE, Stage.VALIDATE):
        view = review_view(stage, store, options, ready_wait, pods)
        app.add_url_rule(f"/{stage.value}", view_func=view, methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        if store.ready():
            return json_response({"status": "ready"})
        return json_response({"status": "not ready: PriorityClasses not synced yet"}, 503)

    @app.get("/metrics")
    def metrics_view() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        response = error_response(f"{err.code} {err.name}: {request.method} {request.path}", err.code or 500)
        for name, value in err.get_headers():
            if name.lower() != "content-type":
                response.headers[name] = value
        return response

    @app.errorhandler(Exception)
    def internal_error(err: Exception) -> Response:
        # The traceback goes to the server log; the client gets one line that leaks nothing.
        log.error("unexpected error on %s %s", request.method, request.path, exc_info=err)
        return error_response("internal error", 500)

    return app
