"""End to end: `serve --kubeconfig` (real gunicorn, real TLS) reading classes from the test API server.

Every change is made on the API server and observed only through reviews over HTTPS, within a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.kubeapi import KubeAPIServer
from testkit.reviews import patch_ops, pod, review
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
from tests.cache.conftest import pc, ready_webhook

pytestmark = pytest.mark.timeout(120)
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeAPIServer, WebhookServer]]:
    """One API server and one webhook (a single worker) for the module: starting them costs seconds."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    with KubeAPIServer(bookmark_interval=0.2) as api, ready_webhook(api, tmp_path) as server:
        yield api, server


@pytest.fixture
def api(cluster: tuple[KubeAPIServer, WebhookServer]) -> KubeAPIServer:
    """The shared API server, back to the system classes only, with no fault left on."""
    api, server = cluster
    api.release()
    api.fail_next(0)
    for item in api.list("priorityclasses"):
        if not item["metadata"]["name"].startswith("system-"):
            api.delete("priorityclasses", item["metadata"]["name"])
    wait_for(lambda: sees(server, None, 0), what="the webhook back to no default class")
    return api


@pytest.fixture
def webhook(cluster: tuple[KubeAPIServer, WebhookServer], api: KubeAPIServer) -> WebhookServer:
    return cluster[1]


def resolve(server: WebhookServer, obj: dict[str, Any]) -> tuple[int | None, str | None]:
    """(priority the webhook sets, denial message) for a pod CREATE sent to /mutate."""
    answer = server.review("/mutate", review(obj))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    if not body["response"]["allowed"]:
        return None, body["response"]["status"]["message"]
    ops = {op["path"]: op.get("value") for op in patch_ops(body)}
    return ops.get("/spec/priority", obj["spec"].get("priority")), None


def sees(server: WebhookServer, class_name: str | None, priority: int | None) -> bool:
    return resolve(server, pod(class_name=class_name))[0] == priority


def test_classes_created_changed_and_deleted_while_serving(
    api: KubeAPIServer, webhook: WebhookServer
) -> None:
    lists = api.list_count(PCS)
    assert resolve(webhook, pod(class_name="high"))[1].endswith("no PriorityClass with name high was found")
    high = api.create("priorityclasses", pc("high", 1000))
    wait_for(lambda: sees(webhook, "high", 1000), what="created class resolved")
    assert sees(webhook, None, 0)
    high = api.update("priorityclasses", {**high, "globalDefault": True})
    wait_for(lambda: sees(webhook, None, 1000), what="new global default applied")
    api.update("priorityclasses", {**high, "globalDefault": False})
    wait_for(lambda: sees(webhook, None, 0), what="global default removed")
    api.delete("priorityclasses", "high")
    wait_for(lambda: resolve(webhook, pod(class_name="high"))[1] is not None, what="deleted class refused")
    assert sees(webhook, "system-node-critical", 2000001000)  # served from the cluster like any class
    assert api.list_count(PCS) == lists  # reviews never cause a LIST


def test_two_global_defaults_the_lower_value_wins(api: KubeAPIServer, webhook: WebhookServer) -> None:
    api.create("priorityclasses", pc("default-high", 2000, globalDefault=True))
    api.create("priorityclasses", pc("default-low", 1000, globalDefault=True))
    wait_for(lambda: sees(webhook, None, 1000), what="the lower default wins")


def test_recovers_from_every_fault_and_answers_meanwhile(api: KubeAPIServer, webhook: WebhookServer) -> None:
    api.create("priorityclasses", pc("base", 7))
    wait_for(lambda: sees(webhook, "base", 7))

    def during(fault: str, name: str, value: int) -> None:
        """Inside a fault: change a class, and reviews still answer from the last known state."""
        api.create("priorityclasses", pc(name, value))
        assert sees(webhook, "base", 7), f"review not answered during {fault}"

    api.drop_watches()
    during("dropped watch", "after-drop", 1)
    wait_for(lambda: sees(webhook, "after-drop", 1))

    api.stall()  # the deletion is only ever seen through the relist that the 410 forces
    api.delete("priorityclasses", "after-drop")
    api.expire_watches()
    api.release()
    during("410 mid-stream", "after-410", 2)
    wait_for(lambda: sees(webhook, "after-410", 2) and not sees(webhook, "after-drop", 1))

    with api.failing(500):
        api.drop_watches()
        during("500s", "after-500", 3)
        wait_for(lambda: sum(r.status == 500 for r in api.requests) >= 3, what="retries under 500s")
        assert not sees(webhook, "after-500", 3)
    wait_for(lambda: sees(webhook, "after-500", 3))

    with api.stalled():
        during("stalled API", "after-stall", 4)
        assert not sees(webhook, "after-stall", 4)
    wait_for(lambda: sees(webhook, "after-stall", 4))

    names = {item["metadata"]["name"] for item in api.list("priorityclasses")}
    assert names == {
        "system-node-critical",
        "system-cluster-critical",
        "base",
        "after-410",
        "after-500",
        "after-stall",
    }


def test_readyz_is_503_until_the_first_list_then_200(tmp_path: Path) -> None:
    with (
        KubeAPIServer() as api,
        api.failing(500),
        webhook_server(tmp_path, "--kubeconfig", api.kubeconfig(tmp_path / "kubeconfig")) as server,
    ):
        wait_for(lambda: api.list_count() >= 2, what="LIST attempted")
        for _ in range(4):  # whichever worker answers
            answer = server.session.get(server.url + "/readyz", timeout=5)
            assert answer.status_code == 503
        api.fail_next(0)
        wait_for(
            lambda: all(
                requests.get(server.url + "/readyz", verify=str(server.ca_file), timeout=5).status_code == 200
                for _ in range(4)
            ),
            what="/readyz 200",
        )

        def metrics() -> str:
            return server.session.get(server.url + "/metrics", timeout=5).text

        # The gauge is the minimum over live workers: 1 only once every worker has synced.
        wait_for(
            lambda: 'priority_webhook_cache_synced{reflector="priorityclasses"} 1.0' in metrics(),
            what="synced on every worker",
        )
        text = metrics()
        assert 'priority_webhook_cache_objects{reflector="priorityclasses"} 2.0' in text
        assert "priority_webhook_cache_last_activity_timestamp_seconds" in text
