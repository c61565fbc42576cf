"""The translation of the chart's pod settings into `podman run` options, and the no-engine case (no engine
needed for these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit import image_engine as engine
from testkit.image_engine import EngineUnavailable, Pod, expand, run_args


def test_kubelet_expansion_of_args() -> None:
    env = {"NODE_NAME": "node-a"}
    cases = [
        ("--node=$(NODE_NAME)", "--node=node-a"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(NODE_NAME)", "$(NODE_NAME)"),
        ("plain", "plain"),
    ]
    for given, want in cases:
        assert expand(given, env) == want, given


def test_the_pod_settings_become_podman_options(tmp_path: Path) -> None:
    pod_spec = {
        "terminationGracePeriodSeconds": 30,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
        "volumes": [
            {"name": "tls", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }
    container = {
        "args": ["sidecar", "--node=$(NODE_NAME)"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": {"limits": {"memory": "192Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tls", "mountPath": "/tls"}, {"name": "tmp", "mountPath": "/tmp"}],
    }
    options, args = run_args(pod_spec, container, Pod("node-a", tmp_path / "sa", tmp_path))
    assert args == ["sidecar", "--node=node-a"]
    for option in (
        "--user=65532:65532",
        "--group-add=65532",
        "--read-only",
        "--read-only-tmpfs=false",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--memory=192m",
        "--stop-timeout=30",
        "--env=NODE_NAME=node-a",
        "--tmpfs=/tls:rw,mode=1777,size=1m",
        f"--volume={tmp_path / 'volumes' / 'tmp'}:/tmp:rw",
        f"--volume={tmp_path / 'sa'}:{engine.SERVICE_ACCOUNT_DIR}:ro",
    ):
        assert option in options, option
    assert not [o for o in options if o.startswith(("--privileged", "--cap-add"))]


def test_settings_it_cannot_translate_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="not translated"):
        run_args({}, {"securityContext": {"sysctls": []}}, Pod("n", None, tmp_path))
    with pytest.raises(AssertionError, match="runAsNonRoot"):
        run_args(
            {"securityContext": {"runAsNonRoot": True, "runAsUser": 0, "runAsGroup": 0}},
            {},
            Pod("n", None, tmp_path),
        )


def test_no_engine_and_no_way_to_install_one_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailable, match="podman is not installed"):
        engine.build(out_dir=tmp_path)
