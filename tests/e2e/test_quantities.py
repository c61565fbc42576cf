"""Quantities: what `review` says about a value matches what the real API server decodes (or refuses to)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.envtest import ControlPlane
from tests.admission.test_validation import QUANTITIES
from webhook.objects.validation import quantity_error


def _pod(value: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": value}}}]},
    }


def test_the_decoder_refuses_what_we_refuse_with_its_words(cluster: ControlPlane) -> None:
    session = cluster.session()
    for value, _ in QUANTITIES:
        body = json.dumps(_pod(value)).encode()
        response = session.post(
            f"{cluster.url}/api/v1/namespaces/default/pods?dryRun=All",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        ours = quantity_error(value)
        if ours is None:
            assert response.status_code != 400, (value, response.text)
        else:
            assert response.status_code == 400, (value, response.text)
            assert response.json()["message"] == f'Pod in version "v1" cannot be handled as a Pod: {ours}'


@pytest.mark.parametrize("value", ["{{cpurequest}}", "1e"])
def test_review_prints_what_kubectl_prints_for_it(cluster: ControlPlane, tmp_path: Path, value: str) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps(_pod(value)))
    theirs = cluster.kubectl("create", "--dry-run=server", "-f", str(path), check=False)
    ours = subprocess.run(
        [sys.executable, "-m", "webhook", "review", str(path)], capture_output=True, text=True, check=False
    )
    assert theirs.returncode == 1 and ours.returncode == 1
    # kubectl names the file it was creating from; review names nothing else: the rest is the same line.
    assert theirs.stderr == ours.stderr.replace(
        "Error from server (BadRequest): ", f'Error from server (BadRequest): error when creating "{path}": '
    )
