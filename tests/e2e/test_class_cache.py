"""The PriorityClass cache against a real API server: changes reach reviews quickly, the cache rides out an
API server restart and a real `410 Gone`, and `/readyz` is 503 until the first LIST.

A cluster of this module's own: the in-tree Priority plugin off (so what a review resolves is what our
cache holds) and `--watch-cache=false`, so that a WATCH from a compacted resourceVersion reaches etcd and
is answered `410 Gone` (with the watch cache on, the API server answers from its own window instead).
The webhook runs with its default two workers: each has its own cache, so a change counts as seen when
several reviews in a row agree.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import (
    RegisteredWebhook,
    ensure_namespace,
    metric,
    pod,
    priority_class,
    registered_webhook,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane
from testkit.server import webhook_server
from testkit.wait import wait_for

NS = "e2e-cache"
SEEN_TIMEOUT = 10.0  # generous: the measured figure is about a tenth of a second (see docs/end-to-end.md)
IN_A_ROW = 4  # reviews in a row that must agree, so that both workers' caches are covered
STOP_TIMEOUT = 3.0  # kube-apiserver waits for open watches (ours) before it exits: SIGKILL after this


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane.start(
        tmp_path_factory.mktemp("envtest-cache"),
        apiserver_args=["--disable-admission-plugins=Priority", "--watch-cache=false"],
    ) as cp:
        ensure_namespace(cp, NS)
        yield cp


@pytest.fixture(scope="module")
def hook(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegisteredWebhook]:
    with registered_webhook(plane, tmp_path_factory.mktemp("cache-hook"), workers=2) as registered:
        yield registered


@pytest.fixture
def cluster(plane: ControlPlane, hook: RegisteredWebhook, attach_logs) -> ControlPlane:
    return attach_logs(plane)


def seen(cluster: ControlPlane, expected: dict[str, int | None], default: int = 0) -> float:
    with cluster.session() as session:
        return wait_until_resolved(
            cluster, session, NS, expected, default, times=IN_A_ROW, timeout=SEEN_TIMEOUT
        )


def cache_metric(hook: RegisteredWebhook, name: str, labels: str = "") -> float:
    return metric(hook.server, f"priority_webhook_cache_{name}", labels)


def test_created_updated_and_deleted_classes_reach_reviews(cluster, hook, record_property) -> None:
    cluster.apply(priority_class("cache-a", 777, description="first"))
    created = seen(cluster, {"cache-a": 777})

    modified = cache_metric(hook, "watch_events_total", 'type="MODIFIED"')
    cluster.kubectl("label", "priorityclass", "cache-a", "tier=e2e")
    cluster.kubectl("patch", "priorityclass", "cache-a", "-p", '{"description": "second"}')
    # Labels and description change no decision; every worker's watch still delivers both changes.
    wait_for(
        lambda: cache_metric(hook, "watch_events_total", 'type="MODIFIED"') >= modified + 4,
        timeout=SEEN_TIMEOUT,
        interval=0.05,
        what="both workers to see two MODIFIED events",
    )
    refused = cluster.kubectl("patch", "priorityclass", "cache-a", "-p", '{"value": 778}', check=False)
    assert refused.returncode == 1 and "may not be changed in an update" in refused.stderr

    cluster.kubectl("patch", "priorityclass", "cache-a", "-p", '{"globalDefault": true}')
    defaulted = seen(cluster, {"cache-a": 777}, default=777)

    cluster.kubectl("delete", "priorityclass", "cache-a")
    deleted = seen(cluster, {"cache-a": None}, default=0)
    for what, seconds in (("create", created), ("update", defaulted), ("delete", deleted)):
        record_property(f"seen_after_{what}_seconds", round(seconds, 3))
        assert seconds < SEEN_TIMEOUT


def test_the_cache_rides_out_an_api_server_restart_and_readyz_waits_for_the_first_list(
    cluster, hook, tmp_path
) -> None:
    """While kube-apiserver is down, a webhook started then is alive but not ready (reviews get 503); the
    running one keeps serving. Once it is back, the new one becomes ready and the running one's watch
    resumes from its resourceVersion (nothing was compacted: no LIST needed)."""
    cluster.apply(priority_class("cache-restart", 10))
    seen(cluster, {"cache-restart": 10})
    reconnects, relists = cache_metric(hook, "reconnects_total"), cache_metric(hook, "relists_total")
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "1",
            "operation": "CREATE",
            "namespace": NS,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": pod("late", NS, "cache-restart"),
        },
    }
    apiserver = cluster.processes["kube-apiserver"]
    apiserver.stop(STOP_TIMEOUT)
    try:
        with webhook_server(tmp_path, "--kubeconfig", str(cluster.kubeconfig), "--workers", "1") as late:
            assert late.session.get(late.url + "/readyz", timeout=5).status_code == 503
            unavailable = late.review("/mutate", review)
            assert unavailable.status_code == 503
            assert unavailable.json()["error"].startswith("PriorityClasses not synced yet")
            # The running webhook stays ready and answers from what it has.
            assert hook.server.session.get(hook.server.url + "/readyz", timeout=5).status_code == 200
            assert hook.server.review("/mutate", review).json()["response"]["allowed"]

            apiserver.start()
            wait_for(cluster.ready, timeout=120, interval=0.1, what="kube-apiserver to come back")
            wait_for(
                lambda: late.session.get(late.url + "/readyz", timeout=5).status_code == 200,
                timeout=60,
                interval=0.1,
                what="/readyz after the first LIST",
            )
            answer = late.review("/mutate", review).json()["response"]
            assert answer["allowed"]
            assert json.loads(base64.b64decode(answer["patch"]))[0] == {
                "op": "add",
                "path": "/spec/priority",
                "value": 10,
            }
    finally:
        if not apiserver.running():
            apiserver.start()
        wait_for(cluster.ready, timeout=120, interval=0.1, what="kube-apiserver")

    cluster.kubectl("delete", "priorityclass", "cache-restart")
    cluster.apply(priority_class("cache-after-restart", 20))
    seen(cluster, {"cache-restart": None, "cache-after-restart": 20})
    assert cache_metric(hook, "reconnects_total") > reconnects
    assert cache_metric(hook, "relists_total") == relists
    cluster.kubectl("delete", "priorityclass", "cache-after-restart")


def test_a_real_410_gone_makes_every_worker_list_again(cluster, hook) -> None:
    cluster.apply(priority_class("cache-gone", 30))
    seen(cluster, {"cache-gone": 30})
    relists = cache_metric(hook, "relists_total")
    # Move etcd's revision past the one the watches stand at (they see no ConfigMap), then compact it
    # away; the restart ends the watches, which come back asking for that revision.
    for i in range(3):
        cluster.kubectl("create", "configmap", f"churn-{i}", "-n", NS)
    cluster.compact_etcd()
    cluster.restart_apiserver(stop_timeout=STOP_TIMEOUT)

    wait_for(
        lambda: cache_metric(hook, "relists_total") >= relists + 2,
        timeout=60,
        interval=0.1,
        what="both workers to re-list after 410 Gone",
    )
    assert hook.server.log().count("priorityclasses: resourceVersion") >= 2
    assert "expired, re-listing" in hook.server.log()
    # The re-listed cache is whole and its new watch works.
    cluster.kubectl("delete", "priorityclass", "cache-gone")
    cluster.apply(priority_class("cache-relisted", 40))
    seen(cluster, {"cache-gone": None, "cache-relisted": 40})
    cluster.kubectl("delete", "priorityclass", "cache-relisted")
