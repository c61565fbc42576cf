"""Where the end-to-end harness finds its control plane: the envtest way (the variable, else setup-envtest's
data folder, newest patch of the wanted minor), and what it says where it finds none. The binaries here are
empty executable files: only their presence is looked at."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.envtest import (
    ASSETS_ENV,
    OLDEST_ASSETS_ENV,
    AssetsMissing,
    assets_dir,
    data_folder,
    etcd_binary,
)
from testkit.server import REPO

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
FULL = ("etcd", "kube-apiserver", "kubectl")


def folder(root: Path, name: str, binaries: tuple[str, ...] = FULL) -> Path:
    path = root / name
    path.mkdir(parents=True)
    for binary in binaries:
        (path / binary).write_text("")
        (path / binary).chmod(0o755)
    return path


def empty_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *unset: str) -> Path:
    """An empty setup-envtest data folder under XDG_DATA_HOME, neither envtest variable nor those in `unset`
    set: the data folder's path (made by `folder()` as a test needs it)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for env in (ASSETS_ENV, OLDEST_ASSETS_ENV, *unset):
        monkeypatch.delenv(env, raising=False)
    return tmp_path / "xdg" / "kubebuilder-envtest" / "k8s"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty setup-envtest data folder under XDG_DATA_HOME, no variable set, no etcd on PATH."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    return empty_data_folder(tmp_path, monkeypatch)


def test_the_data_folder_follows_xdg_data_home(data: Path) -> None:
    assert data_folder() == data


def test_the_data_folder_defaults_to_the_home_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data_folder() == tmp_path / ".local" / "share" / "kubebuilder-envtest" / "k8s"


def test_nothing_found_names_the_places_looked_at(data: Path) -> None:
    with pytest.raises(AssetsMissing) as err:
        assets_dir()
    assert str(err.value) == f"no envtest folder (KUBEBUILDER_ASSETS unset; none under {data})"
    with pytest.raises(AssetsMissing) as err:
        assets_dir(OLDEST_ASSETS_ENV)
    assert str(err.value) == f"no envtest folder (KUBEBUILDER_ASSETS_OLDEST unset; none under {data})"


def test_the_newest_patch_of_the_wanted_minor_for_this_machine(data: Path) -> None:
    for name in ("1.33.2", "1.33.10", "1.33.9", "1.32.99", "1.34.0", "1.3.33", "1.33.x"):
        folder(data, f"{name}-linux-{ARCH}")
    folder(data, "1.33.11-linux-other")
    folder(data, "1.24.3-linux-" + ARCH)
    assert assets_dir() == data / f"1.33.10-linux-{ARCH}"  # 10 after 9: numbers, not strings
    assert assets_dir(OLDEST_ASSETS_ENV) == data / f"1.24.3-linux-{ARCH}"


def test_an_incomplete_newer_patch_gives_way_to_a_complete_one(data: Path) -> None:
    folder(data, f"1.33.5-linux-{ARCH}", ("etcd", "kube-apiserver"))
    folder(data, f"1.33.3-linux-{ARCH}")
    assert assets_dir() == data / f"1.33.3-linux-{ARCH}"


def test_only_incomplete_folders_are_named_with_what_they_lack(data: Path) -> None:
    folder(data, f"1.33.5-linux-{ARCH}", ("kubectl",))
    with pytest.raises(AssetsMissing) as err:
        assets_dir()
    assert str(err.value) == (
        f"no envtest folder (KUBEBUILDER_ASSETS unset; 1.33.5-linux-{ARCH} lacks kube-apiserver, "
        "etcd (in the folder or on PATH))"
    )


def test_etcd_may_come_from_path(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", ("kube-apiserver", "kubectl"))
    with pytest.raises(AssetsMissing):
        assets_dir()
    bin_dir = folder(tmp_path, "bin", ("etcd",))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert assets_dir() == found
    assert etcd_binary(found) == str(bin_dir / "etcd")
    own = folder(data, f"1.33.4-linux-{ARCH}")
    assert etcd_binary(own) == str(own / "etcd")  # the folder's own etcd first


def test_the_variable_wins_over_the_data_folder(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder(data, f"1.33.3-linux-{ARCH}")
    named = folder(tmp_path, "elsewhere")
    monkeypatch.setenv(ASSETS_ENV, str(named))
    assert assets_dir() == named


def test_a_variable_naming_an_incomplete_folder_says_what_it_lacks(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder(data, f"1.33.3-linux-{ARCH}")
    named = folder(tmp_path, "elsewhere", ("etcd",))
    monkeypatch.setenv(ASSETS_ENV, str(named))
    with pytest.raises(AssetsMissing) as err:
        assets_dir()
    assert str(err.value) == f"{ASSETS_ENV}={named} lacks kube-apiserver, kubectl"


def collect(suite: str, env: dict[str, str], marker: str) -> tuple[int, list[str], str]:
    """Collect the folder `suite` in a pytest of its own with `env`: its exit code, the lines that contain
    `marker` (its summary lines), and all it printed."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", suite, "--collect-only", "-q", "-p", "no:randomly"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = run.stdout + run.stderr
    return run.returncode, [line for line in output.splitlines() if marker in line], output


def collect_e2e(env: dict[str, str]) -> tuple[int, list[str]]:
    """Collect tests/e2e in a pytest of its own with `env`: its exit code and the `end-to-end:` lines."""
    code, lines, _ = collect("tests/e2e", env, "end-to-end")
    return code, lines


def test_without_a_folder_each_version_says_it_did_not_run(data: Path) -> None:
    code, lines = collect_e2e({"CI": "true", "E2E_REQUIRED": ""})
    assert code == 5  # nothing collected: every end-to-end test left out
    assert lines == [
        f"end-to-end: not run against Kubernetes 1.33: no envtest folder (KUBEBUILDER_ASSETS unset; none under {data})",
        f"end-to-end: not run against Kubernetes 1.24: no envtest folder (KUBEBUILDER_ASSETS_OLDEST unset; "
        f"none under {data})",
    ]


def test_with_only_the_current_version_only_the_oldest_runs_are_left_out(data: Path) -> None:
    folder(data, f"1.33.3-linux-{ARCH}")
    code, lines = collect_e2e({"E2E_REQUIRED": ""})
    assert code == 0
    assert lines == [
        f"end-to-end: not run against Kubernetes 1.24: no envtest folder (KUBEBUILDER_ASSETS_OLDEST unset; "
        f"none under {data})"
    ]


def test_e2e_required_turns_the_absence_into_an_error(data: Path) -> None:
    code, lines = collect_e2e({"E2E_REQUIRED": "1"})
    assert code == 4  # pytest's usage error: nothing ran
    assert lines == [
        "ERROR: end-to-end tests are required (E2E_REQUIRED=1) but not run against Kubernetes 1.33: no envtest "
        f"folder (KUBEBUILDER_ASSETS unset; none under {data})"
    ]
