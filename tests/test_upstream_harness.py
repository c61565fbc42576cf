"""The upstream suite's harness (testkit/upstream_e2e.py) without a cluster: where it finds `e2e.test` and what
it runs against, the one line it prints where a part is missing, the focus it gives, and how it reads the
suite's own report. The binaries here are empty executable files: only their presence is looked at."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from testkit import upstream_e2e
from tests.test_envtest_discovery import ARCH, collect, empty_data_folder, folder

PLANE = ("etcd", "kube-apiserver", "kubectl")
PARTS = ("kube-controller-manager", "kube-scheduler", "kubemark")
AS_ROOT = [] if os.geteuid() == 0 else ["the hollow nodes' kubelet must run as root (it opens /dev/kmsg)"]


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty setup-envtest data folder; no envtest variable and no E2E_TEST set."""
    return empty_data_folder(tmp_path, monkeypatch, upstream_e2e.E2E_TEST_ENV)


def test_no_envtest_folder_is_named_as_envtest_names_it(data: Path) -> None:
    assert upstream_e2e.unavailable() == f"no envtest folder (KUBEBUILDER_ASSETS unset; none under {data})"


def test_a_control_plane_alone_lacks_e2e_test_and_what_the_specs_need(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", PLANE)
    assert upstream_e2e.unavailable() == "; ".join(
        [
            f"no e2e.test in {found} (E2E_TEST unset)",
            f"no kube-controller-manager in {found}",
            f"no kube-scheduler in {found}",
            f"no kubemark in {found}",
            *AS_ROOT,
        ]
    )


def test_e2e_test_beside_the_control_plane(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *PARTS, "e2e.test"))
    assert upstream_e2e.binary() == found / "e2e.test"
    assert upstream_e2e.unavailable() == ("; ".join(AS_ROOT) or None)


def test_the_variable_names_it_elsewhere(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *PARTS, "e2e.test"))
    elsewhere = folder(tmp_path, "e2e-bin", ("e2e.test",))
    monkeypatch.setenv(upstream_e2e.E2E_TEST_ENV, str(elsewhere / "e2e.test"))
    assert upstream_e2e.binary() == elsewhere / "e2e.test"


def test_a_variable_naming_no_executable_says_so(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *PARTS, "e2e.test"))
    (tmp_path / "e2e.test").write_text("")  # not executable
    monkeypatch.setenv(upstream_e2e.E2E_TEST_ENV, str(tmp_path / "e2e.test"))
    assert upstream_e2e.unavailable() == "; ".join(
        [f"E2E_TEST={tmp_path / 'e2e.test'} is not an executable file", *AS_ROOT]
    )


def test_the_focus_selects_each_spec_by_its_whole_text() -> None:
    pattern = re.compile(upstream_e2e.focus(upstream_e2e.SPECS))
    for name in upstream_e2e.SPECS:
        assert pattern.search(name)
        assert pattern.search("Kubernetes e2e suite " + name)  # as Ginkgo matches it
        assert not pattern.search(name + " [Slow]")  # a longer text is another spec
    # The brackets are literal: "[Serial]" is not a character class.
    assert not pattern.search(upstream_e2e.SPECS[0].replace("[Serial]", "S"))


def spec_report(
    leaf: str, state: str, *, kind: str = "It", seconds: float = 1.5, **failure: object
) -> object:
    """One entry of a Ginkgo JSON report's SpecReports, with the fields the harness reads."""
    report: dict[str, object] = {
        "ContainerHierarchyTexts": ["[sig-x] Thing [Serial]", "Context"] if kind == "It" else None,
        "LeafNodeType": kind,
        "LeafNodeText": leaf,
        "State": state,
        "RunTime": int(seconds * 1e9),
    }
    if failure:
        report["Failure"] = failure
    return report


def test_the_report_gives_the_specs_that_ran_with_their_failures(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    reports = [
        spec_report("", "passed", kind="SynchronizedBeforeSuite"),
        spec_report("works", "passed"),
        spec_report("was not focused", "skipped"),
        spec_report(
            "breaks",
            "failed",
            seconds=300,
            Message="Timed out after 300s.\nExpected Pod to be Running",
            Location={"FileName": "test/e2e/x.go", "LineNumber": 179},
        ),
        spec_report("panics", "panicked", Message="Test Panicked", ForwardedPanic="nil map"),
        spec_report("Kubernetes e2e suite report", "passed", kind="ReportAfterSuite"),
    ]
    path.write_text(json.dumps([{"SuiteDescription": "Kubernetes e2e suite", "SpecReports": reports}]))
    specs = upstream_e2e.read_report(path)
    assert [(spec.name, spec.state, spec.passed) for spec in specs] == [
        ("[sig-x] Thing [Serial] Context works", "passed", True),
        ("[sig-x] Thing [Serial] Context breaks", "failed", False),
        ("[sig-x] Thing [Serial] Context panics", "panicked", False),
    ]
    assert specs[0].failure == "" and specs[0].seconds == 1.5
    assert specs[1].failure == "Timed out after 300s.\nExpected Pod to be Running\n  at test/e2e/x.go:179"
    assert specs[1].seconds == 300
    assert specs[2].failure == "Test Panicked\npanic: nil map"


def collect_upstream(env: dict[str, str]) -> tuple[int, list[str], str]:
    """Collect tests/upstream in a pytest of its own: its exit code, the `upstream e2e` lines, all it printed."""
    return collect("tests/upstream", env, "upstream e2e")


def test_without_e2e_test_the_suite_is_left_out_with_one_line(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *PARTS))
    code, lines, output = collect_upstream({"CI": "true", "UPSTREAM_E2E_REQUIRED": ""})
    assert code == 5, output  # nothing left to run
    assert lines == ["; ".join([f"upstream e2e: not run: no e2e.test in {found} (E2E_TEST unset)", *AS_ROOT])]


def test_required_makes_the_absence_an_error(data: Path) -> None:
    code, lines, output = collect_upstream({"UPSTREAM_E2E_REQUIRED": "1"})
    assert code == 4, output  # pytest's usage error: nothing ran
    assert any(
        "upstream e2e tests are required (UPSTREAM_E2E_REQUIRED=1) but upstream e2e: not run: no envtest folder"
        in line
        for line in lines
    ), output
