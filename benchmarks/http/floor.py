"""The floor for the HTTP benchmark: a Flask app that answers every POST with a constant AdmissionReview,
served by exactly the gunicorn settings, TLS and workers of `priority-webhook serve`.

    python benchmarks/http/floor.py --bind 127.0.0.1:9443 --cert-dir DIR [--workers 2 --threads 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from flask import Flask, Response

from webhook.server.gunicorn import ServeSettings, WebhookApplication, cert_files
from webhook.server.tlscontext import ReloadingContext

CONSTANT = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "x", "allowed": True},
    }
)


class FloorApplication(WebhookApplication):
    def load(self) -> Any:
        app = Flask("floor")

        @app.post("/mutate")
        @app.post("/validate")
        def constant() -> Response:
            return Response(CONSTANT, mimetype="application/json")

        @app.get("/healthz")
        def healthz() -> Response:
            return Response("{}", mimetype="application/json")

        return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", required=True)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    settings = ServeSettings(
        bind=args.bind, cert_dir=args.cert_dir, workers=args.workers, threads=args.threads
    )
    FloorApplication(settings, ReloadingContext(*cert_files(args.cert_dir))).run()


if __name__ == "__main__":
    main()
