"""The class cache on a quiet cluster, on the real API server: no failure, no growing delay, fresh within 1 s.

Nothing changes PriorityClasses for a while. The real 1.33 API server sends no event, and may send no
bookmark, on such a watch; the reflector's read timeout used to cut it after 75 s and count a failure, so
on a healthy quiet cluster the retry delay grew (0.2 s to 30 s) with no watch open while it waited. Now a
watch's read timeout outlives the `timeoutSeconds` it asks for, and a watch that ran resets the delay.

Three class stores (three webhook workers) with the production settings, 150 s of quiet, then one
change: every store sees it within a second. The compressed hour is in tests/cache/test_reflector.py.
"""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

from testkit.cluster_webhook import priority_class
from testkit.envtest import ControlPlane
from testkit.wait import wait_for
from webhook.kube.class_store import ClusterClassStore
from webhook.kube.config import api_client

QUIET_SECONDS = 150  # two of the old 75 s read timeouts; the API server ends no watch before 300 s
NAME = "e2e-after-the-quiet"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def test_after_minutes_of_quiet_every_worker_sees_a_change_within_a_second(cluster: ControlPlane) -> None:
    cluster.kubectl("delete", "priorityclass", NAME, "--ignore-not-found")
    stamp = f"{time.time_ns():x}"
    stores = [
        ClusterClassStore(api_client(str(cluster.kubeconfig), False), name=f"quiet-{stamp}-{i}")
        for i in range(3)
    ]
    for store in stores:
        store.start()
    try:
        assert all(store.wait_ready(30) for store in stores)
        quiet_ends = time.monotonic() + QUIET_SECONDS
        wait_for(lambda: time.monotonic() >= quiet_ends, timeout=QUIET_SECONDS + 10, interval=1)
        reconnects = [
            REGISTRY.get_sample_value(
                "priority_webhook_cache_reconnects_total", {"reflector": s.reflector.name}
            )
            for s in stores
        ]
        assert reconnects == [0, 0, 0], "a quiet watch is no failure"
        with cluster.session() as session:
            changed = time.monotonic()
            created = session.post(cluster.url + CLASSES, json=priority_class(NAME, 42), timeout=30)
            assert created.status_code == 201, created.text
        wait_for(lambda: all(NAME in store.snapshot() for store in stores), timeout=30, interval=0.005)
        seen = time.monotonic() - changed
        assert seen < 1.0, f"seen by every worker {seen:.2f}s after the change was sent"
    finally:
        for store in stores:
            store.stop()
        cluster.kubectl("delete", "priorityclass", NAME, "--ignore-not-found", check=False)
