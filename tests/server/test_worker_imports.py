"""What a webhook replica loads as the chart runs it (`serve --in-cluster`), listed from the running processes.

Flask, Werkzeug and Jinja were 14 MiB of every process of a replica; the worker answers reviews, probes
and scrapes without them, and builds the app only for a request nothing else answers. The
`serving-without-flask` contract says so of the import graph; this says so of the processes: the master
and its workers run against the test API server with a service account as the kubelet mounts it, are
probed, scraped and sent reviews (small ones on the loop, a large one in a thread), and their
`-X importtime` report lists what they loaded. Nor does a replica in a pod load urllib3.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from testkit.import_report import modules_in
from testkit.in_pod import in_pod
from testkit.kubeapi import KubeAPIServer
from testkit.reviews import pod, priority_class, review
from testkit.server import free_port, running_server
from testkit.wait import wait_for
from webhook.files import tls
from webhook.server.endpoint import ON_LOOP_MAX_BYTES

WEB_FRAMEWORK = {"flask", "werkzeug", "jinja2"}


def test_a_replica_answers_probes_scrapes_and_reviews_without_the_web_framework(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    tls.write_certificates(cert_dir)
    port = free_port()
    log_file = tmp_path / "serve.log"
    with KubeAPIServer(tls=True, token=secrets.token_urlsafe(16)) as api:
        api.create("priorityclasses", priority_class("high", 1000))
        argv = ["serve", "--in-cluster", "--bind", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir)]
        command, env = in_pod(api, tmp_path / "serviceaccount", *argv)
        env = {**env, "PYTHONPROFILEIMPORTTIME": "1", "PYTHONUNBUFFERED": "1", "HOME": os.environ["HOME"]}
        with running_server(command, port, cert_dir, log_file, env=env) as server:
            wait_for(lambda: server.session.get(server.url + "/readyz", timeout=5).ok, what="replica ready")
            assert server.session.get(server.url + "/healthz", timeout=5).json() == {"status": "ok"}
            small = server.review("/mutate", review(pod(class_name="high")))
            large_pod = pod(class_name="high", priority=1000, preemptionPolicy="PreemptLowerPriority")
            large_pod["metadata"]["annotations"] = {"note": "x" * ON_LOOP_MAX_BYTES}  # answered in a thread
            large = server.review("/validate", review(large_pod))
            for answer in (small, large):
                assert answer.status_code == 200 and answer.json()["response"]["allowed"], answer.text
            scrape = server.session.get(server.url + "/metrics", timeout=5)
            assert 'webhook="validate"' in scrape.text and 'webhook="mutate"' in scrape.text

            loaded = {name.split(".")[0] for name in modules_in(server.log())}
            assert "prometheus_client" in loaded and "gunicorn" in loaded  # the report lists what ran
            assert loaded & WEB_FRAMEWORK == set(), sorted(loaded & WEB_FRAMEWORK)
            assert "urllib3" not in loaded  # a pod's requests go on http.client (webhook.kube.https_pool)

            # Anything else reaches the app, built then: the check above can fail, and the answer is ours.
            unknown = server.session.get(server.url + "/nowhere", timeout=10)
            assert unknown.status_code == 404
            assert unknown.json() == {"error": "404 Not Found: GET /nowhere"}
            wrong_method = server.session.get(server.url + "/mutate", timeout=10)
            assert wrong_method.status_code == 405
            assert {name.split(".")[0] for name in modules_in(server.log())} >= {"flask", "werkzeug"}
