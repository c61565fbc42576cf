"""Where the webhook's per-request time goes, in process: the WSGI app against the constant-response floor
app, and each step of a /mutate review on its own (best of several repeats, microseconds).

    .venv/bin/python benchmarks/http/attribution.py

It explains the HTTP benchmark's ratio (benchmarks/http/run.py): TLS, HTTP parsing and gunicorn cost the
same for both servers; what differs is in this table.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
# As under `serve`: multiprocess metrics (set before prometheus_client is imported).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="priority-webhook-attribution-"))

from flask import Flask, Response  # noqa: E402
from floor import CONSTANT  # noqa: E402
from run import realistic_review  # noqa: E402

from webhook import json_codec  # noqa: E402
from webhook.files.class_files import static_store  # noqa: E402
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS  # noqa: E402
from webhook.review.handler import Stage, decide_request, parse_review, response_review  # noqa: E402
from webhook.review.schema import OBJECT_SCHEMAS, REVIEW_SCHEMA  # noqa: E402
from webhook.review.shapes import POD  # noqa: E402
from webhook.server import metrics  # noqa: E402
from webhook.server.app import create_app  # noqa: E402


def main() -> None:
    data = json.dumps(realistic_review()).encode()
    store = static_store([str(REPO / "examples" / "priorityclasses.yaml")])
    classes = store.snapshot()
    ours = create_app(store)
    floor = Flask("floor")

    @floor.post("/mutate")
    def constant() -> Response:
        return Response(CONSTANT, mimetype="application/json")

    def call(app: Flask) -> None:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/mutate",
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "443",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "https",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.input_terminated": True,
        }
        body = app(environ, lambda status, headers: None)
        b"".join(body)
        getattr(body, "close", lambda: None)()

    review = json.loads(data)
    pod = review["request"]["object"]
    _, _, request = parse_review(review)
    decision = decide_request(request, Stage.MUTATE, classes, DEFAULT_POD_OPTIONS)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("floor app (WSGI call)", lambda: call(floor)),
        ("webhook app (WSGI call)", lambda: call(ours)),
        (f"  {json_codec.ENGINE}.loads of the body", lambda: json_codec.loads(data)),
        ("  parse_review (fast type check)", lambda: parse_review(review)),
        ("  (marshmallow: envelope, off path)", lambda: REVIEW_SCHEMA.load(review)),
        ("  (marshmallow: pod fields, off path)", lambda: OBJECT_SCHEMAS[POD].validate(pod)),
        ("  decision", lambda: decide_request(request, Stage.MUTATE, classes, DEFAULT_POD_OPTIONS)),
        (
            "  response review + json.dumps",
            lambda: json.dumps(response_review("v1", "u", decision, with_patch=True)),
        ),
        (
            "  metrics (counter + histogram)",
            lambda: metrics.observe("mutate", "CREATE", "pods", "allowed", 0.001),
        ),
    ]
    print(f"review body: {len(data)} bytes; best of 9 repeats x 1000 calls")
    for name, step in steps:
        micros = min(timeit.repeat(step, number=1000, repeat=9)) / 1000 * 1e6
        print(f"{name:34s} {micros:7.1f} us")


if __name__ == "__main__":
    main()
