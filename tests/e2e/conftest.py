"""End-to-end fixtures: a real control plane from an envtest folder (see testkit/envtest.py).

The folder is found the envtest way: `KUBEBUILDER_ASSETS`, else setup-envtest's data folder. Where none is
found the end-to-end tests do not run, on a workstation and in CI alike, and the summary says so in one line
per version with the places looked at. `E2E_REQUIRED=1` (for a CI that provides envtest) turns that absence
into an error. A failing test gets the tail of every control-plane log in its report, and its working folder
(full logs, certificates, etcd data) is kept.

Two Kubernetes versions: the current one (`KUBEBUILDER_ASSETS`, else 1.33.x) runs everything; the oldest one
we still prove (`KUBEBUILDER_ASSETS_OLDEST`, else 1.24.x) runs the focused subset of tests that ask for
`both_versions` (a shared cluster of each version), `both_versions_assets` (binaries for a cluster of the
test's own) or `oldest_plane`: each such test runs once per version, its id ending in `[current]` or
`[oldest]`. The summary counts the tests per kube-apiserver version.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster_webhook import RegisteredWebhook, registered_webhook
from testkit.envtest import (
    ASSETS_ENV,
    OLDEST_ASSETS_ENV,
    WANTED,
    AssetsMissing,
    ControlPlane,
    assets_dir,
)

_PLANES = pytest.StashKey[list[ControlPlane]]()
_HERE = Path(__file__).parent
_RAN: dict[str, int] = {}
_NOT_RUN: list[str] = []
OLDEST = pytest.mark.oldest_version
VERSIONS = ("current", pytest.param("oldest", marks=OLDEST))
_OLDEST_FIXTURES = {"oldest_assets", "oldest_plane"}


def e2e_required() -> bool:
    """`E2E_REQUIRED=1`: a missing envtest folder is an error rather than a line in the summary."""
    return os.environ.get("E2E_REQUIRED", "").lower() in ("1", "true", "yes")


def needs_oldest(item: pytest.Item) -> bool:
    """The test runs on the oldest version (its `[oldest]` instance, or an oldest-only test)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker(OLDEST.name) is not None or bool(fixtures & _OLDEST_FIXTURES)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without an envtest folder for a version, leave its end-to-end tests out with one summary line (or,
    under E2E_REQUIRED=1, stop with that line as the error)."""
    ours = [item for item in items if _HERE in item.path.parents]
    left_out: list[pytest.Item] = []
    for env in (ASSETS_ENV, OLDEST_ASSETS_ENV):
        try:
            assets_dir(env)
            continue
        except AssetsMissing as err:
            reason = f"not run against Kubernetes {WANTED[env]}: {err}"
        if e2e_required() and ours:
            raise pytest.UsageError(f"end-to-end tests are required (E2E_REQUIRED=1) but {reason}")
        if env == OLDEST_ASSETS_ENV:
            skipped = [item for item in ours if needs_oldest(item) and item not in left_out]
        else:
            skipped = list(ours)
        left_out.extend(skipped)
        _NOT_RUN.append(f"end-to-end: {reason}")
    if left_out:
        gone = set(left_out)
        items[:] = [item for item in items if item not in gone]
        config.hook.pytest_deselected(items=left_out)


def _require_assets(env: str = ASSETS_ENV) -> Path:
    """The envtest folder for `env`; a test that gets here without one (it escaped collection's check,
    e.g. a kubelet test on a folder without kubemark) is skipped, or fails under E2E_REQUIRED=1."""
    try:
        return assets_dir(env)
    except AssetsMissing as err:
        if e2e_required():
            pytest.fail(f"end-to-end tests are required (E2E_REQUIRED=1): {err}", pytrace=False)
        pytest.skip(f"end-to-end tests need a control plane: {err}")


def _track(request: pytest.FixtureRequest, plane: ControlPlane) -> None:
    request.node.stash.setdefault(_PLANES, []).append(plane)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One shared cluster for the session: kube-apiserver with its default admission plugins (the in-tree
    Priority plugin included) and the controller manager. Tests leave it as they found it (own namespaces)."""
    _require_assets()
    with ControlPlane.start(tmp_path_factory.mktemp("envtest"), controller_manager=True) as plane:
        yield plane


@pytest.fixture
def cluster(control_plane: ControlPlane, request: pytest.FixtureRequest) -> ControlPlane:
    """The session's cluster, with its logs attached to this test's report if the test fails."""
    _track(request, control_plane)
    return control_plane


@pytest.fixture(scope="session")
def no_priority_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A second shared cluster, started on first use: the in-tree Priority plugin off
    (`--disable-admission-plugins=Priority`), so that our webhook alone decides pod priority. Modules
    register the webhook for their own tests (module-scoped) and leave no PriorityClass behind."""
    _require_assets()
    with ControlPlane.start(
        tmp_path_factory.mktemp("envtest-no-priority"),
        apiserver_args=["--disable-admission-plugins=Priority"],
        controller_manager=True,
    ) as plane:
        yield plane


@pytest.fixture(scope="session")
def no_priority_webhook(
    no_priority_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegisteredWebhook]:
    """Our webhook (one worker) registered on `no_priority_plane` with the chart's configurations, started on
    first use and shared by the modules that test it there; a test that stops it brings it back."""
    with registered_webhook(
        no_priority_plane, tmp_path_factory.mktemp("no-priority-webhook"), workers=1
    ) as hook:
        yield hook


@pytest.fixture
def no_priority_cluster(no_priority_plane: ControlPlane, request: pytest.FixtureRequest) -> ControlPlane:
    """The cluster without the in-tree Priority plugin, its logs attached to this test's report on failure."""
    _track(request, no_priority_plane)
    return no_priority_plane


@pytest.fixture
def attach_logs(request: pytest.FixtureRequest) -> Callable[[ControlPlane], ControlPlane]:
    """For a cluster a module started itself: its logs go into this test's report if the test fails."""

    def attach(plane: ControlPlane) -> ControlPlane:
        _track(request, plane)
        return plane

    return attach


@pytest.fixture(scope="session")
def oldest_assets() -> Path:
    """The binaries of the oldest Kubernetes we prove (KUBEBUILDER_ASSETS_OLDEST, else 1.24.x in
    setup-envtest's data folder): pass them as `start_control_plane(assets=oldest_assets)` for behaviour
    that differs between versions."""
    return _require_assets(OLDEST_ASSETS_ENV)


@pytest.fixture(scope="session")
def oldest_plane(oldest_assets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The session cluster's twin on the oldest version (controller manager, default admission plugins),
    started on first use."""
    with ControlPlane.start(
        tmp_path_factory.mktemp("envtest-oldest"), controller_manager=True, assets=oldest_assets
    ) as plane:
        yield plane


@pytest.fixture(params=VERSIONS)
def both_versions(request: pytest.FixtureRequest) -> ControlPlane:
    """The test runs twice: on the session cluster (current version) and on `oldest_plane`. Expectations
    that differ say which version does what (`ControlPlane.minor`)."""
    plane: ControlPlane = request.getfixturevalue(
        "control_plane" if request.param == "current" else "oldest_plane"
    )
    _track(request, plane)
    return plane


@pytest.fixture(params=VERSIONS)
def both_versions_assets(request: pytest.FixtureRequest) -> Path:
    """The test runs twice, with the binaries of each version, for a cluster of its own:
    `start_control_plane(assets=both_versions_assets)`."""
    if request.param == "current":
        return _require_assets()
    return Path(request.getfixturevalue("oldest_assets"))


@pytest.fixture
def start_control_plane(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ControlPlane]]:
    """A cluster of the test's own: `start_control_plane(apiserver_args=[...], scheduler=True)`."""
    _require_assets()
    started: list[ControlPlane] = []

    def start(**kwargs: Any) -> ControlPlane:
        plane = ControlPlane.create(tmp_path / f"envtest-{len(started)}", **kwargs)
        started.append(plane)
        _track(request, plane)
        return plane

    yield start
    for plane in started:
        plane.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    planes = item.stash.get(_PLANES, [])
    if not planes:
        return
    if report.when == "call":
        for version in {_label(plane) for plane in planes}:
            _RAN[version] = _RAN.get(version, 0) + 1
    if report.failed:
        for plane in planes:
            report.sections.append((f"control plane {plane.workdir} (kept)", plane.logs()))


def _label(plane: ControlPlane) -> str:
    """The plane's version and the folder it came from (a test that used both counts for both)."""
    return f"{plane.version} ({plane.assets})"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _NOT_RUN:
        terminalreporter.write_line(line)
    for version, count in sorted(_RAN.items()):
        terminalreporter.write_line(f"end-to-end: {count} tests ran against kube-apiserver {version}")
