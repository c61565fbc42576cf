"""The admission webhook's WSGI app: /mutate and /validate through their endpoints
(webhook.server.endpoint), and /healthz, /readyz, /metrics through the probes (webhook.server.probes).
The serving worker calls both directly and builds this app only for a request neither answers (an
unknown path or method); tests and any other WSGI server use it whole.

Every answer is JSON. A body that is not a review we can answer gets 400 with a one-line
`{"error": "<field>: <problem>"}`; nothing, not even a bug, produces an HTML page or a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import IO, Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import json_codec
from webhook.policy.class_model import ClassStore
from webhook.policy.eviction_rules import PodNodes
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions
from webhook.server.endpoint import READY_WAIT, BadRequest, ReviewEndpoint, endpoints
from webhook.server.limits import JSON, MAX_BODY_BYTES
from webhook.server.probes import Probe, Probes
from webhook.server.store import NamespaceCache

log = logging.getLogger(__name__)

# Kept importable from here: tests and benchmarks name them with the app.
__all__ = ["MAX_BODY_BYTES", "READY_WAIT", "BadRequest", "create_app", "read_body"]


def json_response(payload: Any, status: int = 200) -> Response:
    body = json_codec.dumps(payload)
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


def review_view(endpoint: ReviewEndpoint) -> Callable[[], Response]:
    def view() -> Response:
        status, body = endpoint.answer(
            request.content_type, lambda: read_body(request.environ, request.content_length)
        )
        return Response(body, status=status, mimetype=JSON)

    view.__name__ = endpoint.stage.value
    return view


def probe_view(probe: Probe) -> Callable[[], Response]:
    def view() -> Response:
        status, content_type, body = probe()
        return Response(body, status=status, content_type=content_type)

    view.__name__ = probe.__name__
    return view


def create_app(
    store: ClassStore,
    options: PodOptions = DEFAULT_POD_OPTIONS,
    *,
    ready_wait: float = READY_WAIT,
    pods: PodNodes | None = None,
    namespaces: NamespaceCache | None = None,
) -> Flask:
    """The WSGI app for one worker; `store` is read once per review (a snapshot). A review waits only for
    a cluster store's first sync (and the Namespace cache's), at most `ready_wait` seconds, and is refused
    with 503 after that. `pods` looks up an evicted pod's node (cluster mode); a failed lookup is answered
    503. `namespaces` gives the labels allowed-namespaces rules read (cluster mode)."""
    reviews = endpoints(store, options, ready_wait=ready_wait, pods=pods, namespaces=namespaces)
    return app_for(reviews, Probes(store, namespaces))


def app_for(reviews: Mapping[str, ReviewEndpoint], probes: Probes) -> Flask:
    """The app over endpoints and probes made elsewhere: the serving worker makes them at start and
    answers their paths itself, and builds this only for a request they do not answer."""
    app = Flask(__name__)
    for path, endpoint in reviews.items():
        app.add_url_rule(path, view_func=review_view(endpoint), methods=["POST"])
    for path, probe in {**probes.on_loop(), **probes.in_thread()}.items():
        app.add_url_rule(path, view_func=probe_view(probe), methods=["GET"])

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
