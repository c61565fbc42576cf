"""The reflector against the test API server over real HTTP: list, watch, and recovery from every fault.

After each fault the cache must equal the server exactly (same objects at the same resourceVersions):
no lost object, no phantom one. Each test runs on both transports (tests/cache/conftest.py).
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from testkit.kubeapi import KubeAPIServer, RequestRecord
from testkit.wait import wait_for
from tests.cache.conftest import FAST, pc
from webhook.kube import rest
from webhook.kube.cache import ObjectCache
from webhook.kube.config import api_client
from webhook.kube.reflector import Reflector, retry_cap

PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
PODS = "/api/v1/pods"


@pytest.fixture
def reflect(
    api: KubeAPIServer, connect: Callable[[KubeAPIServer], rest.Client]
) -> Iterator[Callable[..., tuple[Reflector, ObjectCache]]]:
    """Start reflectors (name unique per test, for metrics) into fresh caches; stopped at teardown."""
    started: list[Reflector] = []

    def make(
        path: str = PCS, server: KubeAPIServer | None = None, **kwargs: Any
    ) -> tuple[Reflector, ObjectCache]:
        cache = ObjectCache()
        server = server or api
        name = kwargs.pop("name", unique("test"))
        reflector = Reflector(connect(server), path, cache, name=name, **{**FAST, **kwargs})
        reflector.start()
        started.append(reflector)
        return reflector, cache

    yield make
    for reflector in started:
        reflector.stop(timeout=5)


def unique(prefix: str) -> str:
    """A reflector name of its own: metrics are process-wide, so a name reused by another test (or a rerun of
    this one) would start its counters where the last one left them."""
    return f"{prefix}-{random.getrandbits(48):x}"


def state(objects: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in objects
    }


def converge(cache: ObjectCache, api: KubeAPIServer, plural: str = "priorityclasses") -> None:
    """Wait until the cache holds exactly the server's objects at the server's versions."""
    wait_for(
        lambda: state(cache.list()) == state(api.list(plural)), timeout=10, what=f"cache == server ({plural})"
    )


def metric(name: str, reflector: Reflector, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"reflector": reflector.name, **labels}) or 0.0


# -- the normal path ---------------------------------------------------------------------------------------
def test_lists_then_watches_from_the_lists_resource_version_with_bookmarks(
    api: KubeAPIServer, reflect
) -> None:
    api.create("priorityclasses", pc("high", 1000))
    reflector, cache = reflect()
    assert reflector.wait_synced(5)
    assert reflector.synced
    assert state(cache.list()) == state(api.list("priorityclasses"))
    wait_for(lambda: api.watch_count(PCS) >= 1)
    listing, watching = [r for r in api.requests if r.path == PCS][:2]
    assert not listing.watch
    assert watching.watch
    assert watching.query["resourceVersion"] == cache.resource_version
    assert watching.query["allowWatchBookmarks"] == "true"
    assert FAST["timeout_seconds"] <= int(watching.query["timeoutSeconds"]) <= 2 * FAST["timeout_seconds"]


def test_applies_added_modified_deleted_in_order(api: KubeAPIServer, reflect) -> None:
    reflector, cache = reflect()
    assert reflector.wait_synced(5)
    seen: list[tuple[str, str | None, str | None]] = []
    cache.add_listener(
        lambda ev, old, new: seen.append((ev, old and old.get("description"), new and new.get("description")))
    )
    a = api.create("priorityclasses", pc("a", 1, description="one"))
    api.update("priorityclasses", {**a, "description": "two"})
    api.delete("priorityclasses", "a")
    wait_for(lambda: len(seen) >= 3)
    assert seen == [("ADDED", None, "one"), ("MODIFIED", "one", "two"), ("DELETED", "two", None)]
    converge(cache, api)


def test_a_transform_shapes_every_object_before_the_store(api: KubeAPIServer, reflect) -> None:
    """Listed and watched objects alike reach the store as the transform made them (client-go's
    TransformFunc); the reflector's own bookkeeping (resourceVersion) is unaffected."""

    def without_description(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k != "description"}

    api.create("priorityclasses", pc("listed", 1, description="dropped"))
    reflector, cache = reflect(transform=without_description)
    assert reflector.wait_synced(5)
    api.create("priorityclasses", pc("watched", 2, description="dropped"))
    converge(cache, api)
    assert {o["metadata"]["name"] for o in cache.list()} >= {"listed", "watched"}
    assert all("description" not in o for o in cache.list())
    assert reflector.resource_version == cache.resource_version


def test_bookmarks_advance_the_resource_version_without_changing_the_store(
    api: KubeAPIServer, reflect
) -> None:
    reflector, cache = reflect()
    assert reflector.wait_synced(5)
    changes: list[str] = []
    cache.add_listener(lambda ev, old, new: changes.append(ev))
    head = api.create("pods", {"metadata": {"name": "elsewhere"}, "spec": {}})["metadata"]["resourceVersion"]
    wait_for(lambda: reflector.resource_version == head, what="a bookmark at the new revision")
    assert changes == []
    assert metric("priority_webhook_cache_watch_events_total", reflector, type="BOOKMARK") >= 1


def test_a_server_side_watch_timeout_rewatches_without_relisting(api: KubeAPIServer, reflect) -> None:
    reflector, cache = reflect(timeout_seconds=1)
    assert reflector.wait_synced(5)
    wait_for(lambda: api.watch_count(PCS) >= 3, timeout=15)
    api.create("priorityclasses", pc("after", 1))
    converge(cache, api)
    assert api.list_count(PCS) == 1
    assert metric("priority_webhook_cache_reconnects_total", reflector) == 0


def test_field_selector_keeps_only_matching_objects(api: KubeAPIServer, reflect) -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    created = api.create("pods", pod)
    reflector, cache = reflect(PODS, field_selector="spec.nodeName=n1")
    assert reflector.wait_synced(5)
    assert cache.get("ns", "p") is not None
    api.update("pods", {**created, "spec": {"nodeName": "n2"}})  # leaves the selector: DELETED
    wait_for(lambda: cache.get("ns", "p") is None)
    api.create("pods", {"metadata": {"name": "q", "namespace": "ns"}, "spec": {"nodeName": "n1"}})
    wait_for(lambda: cache.get("ns", "q") is not None)
    assert [r.query.get("fieldSelector") for r in api.requests if r.path == PODS][:2] == [
        "spec.nodeName=n1"
    ] * 2


# -- faults ------------------------------------------------------------------------------------------------
def test_dropped_watch_reconnects_from_the_last_version_without_relisting(
    api: KubeAPIServer, reflect
) -> None:
    reflector, cache = reflect()
    assert reflector.wait_synced(5)
    for round_ in range(3):
        wait_for(lambda: api.open_watches == 1)
        api.drop_watches()
        api.create("priorityclasses", pc(f"during-{round_}", round_))
        converge(cache, api)
    assert api.list_count(PCS) == 1
    assert metric("priority_webhook_cache_reconnects_total", reflector) == 3


def test_410_mid_stream_relists_and_drops_phantoms(api: KubeAPIServer, reflect) -> None:
    api.create("priorityclasses", pc("doomed", 1))
    reflector, cache = reflect()
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    api.stall()  # the deletion below must reach the reflector only through the relist
    api.delete("priorityclasses", "doomed")
    api.create("priorityclasses", pc("born", 2))
    api.expire_watches()
    api.release()
    converge(cache, api)
    assert cache.get("", "doomed") is None
    assert api.list_count(PCS) == 2
    assert metric("priority_webhook_cache_relists_total", reflector) == 1


@pytest.mark.parametrize("gone_as_http", [False, True], ids=["error-event", "http-410"])
def test_410_on_reconnect_relists(gone_as_http: bool, new_api: Callable[..., KubeAPIServer], reflect) -> None:
    with new_api(gone_as_http=gone_as_http, bookmark_interval=0.2) as api:
        api.create("priorityclasses", pc("doomed", 1))
        reflector, cache = reflect(server=api)
        assert reflector.wait_synced(5)
        wait_for(lambda: api.open_watches == 1)
        with api.stalled():  # the re-watch waits until the history it needs is gone
            api.drop_watches()
            api.delete("priorityclasses", "doomed")
            api.compact()
        converge(cache, api)
        assert cache.get("", "doomed") is None
        assert metric("priority_webhook_cache_relists_total", reflector) == 1


def test_a_watch_that_is_always_gone_relists_with_backoff_not_in_a_hot_loop(
    api: KubeAPIServer, reflect
) -> None:
    with api.failing(410, match=lambda record: record.watch):
        reflector, _ = reflect(backoff_initial=0.01, backoff_max=0.05)
        wait_for(lambda: metric("priority_webhook_cache_relists_total", reflector) >= 4)
        relists = metric("priority_webhook_cache_relists_total", reflector)
        backoffs = metric("priority_webhook_cache_reconnects_total", reflector)
        assert backoffs >= relists - 1  # a backoff before every relist but the one in flight
    assert reflector.synced


def test_random_changes_under_random_faults_converge(api: KubeAPIServer, reflect) -> None:
    """A seeded mix of writes and faults; after each burst the cache equals the server."""
    rng = random.Random(20261202)
    reflector, cache = reflect(read_timeout=0.5)
    assert reflector.wait_synced(5)
    faults = {
        "drop": api.drop_watches,
        "expire": api.expire_watches,
        "compact": api.compact,
        "fail": lambda: api.fail_next(rng.randint(1, 4)),
    }
    for burst in range(12):
        for step in range(rng.randint(1, 6)):
            names = [o["metadata"]["name"] for o in api.list("priorityclasses")]
            action = rng.choice(["create", "update", "delete", "fault"])
            if action == "create" or not names:
                api.create("priorityclasses", pc(f"c-{burst}-{step}", rng.randint(-10, 10)))
            elif action == "update":
                obj = api.get("priorityclasses", rng.choice(names))
                api.update("priorityclasses", {**obj, "description": f"{burst}-{step}"})
            elif action == "delete":
                api.delete("priorityclasses", rng.choice(names))
            else:
                faults[rng.choice(sorted(faults))]()
        converge(cache, api)


def test_500s_for_a_while_then_recovery_with_backoff(api: KubeAPIServer, reflect) -> None:
    reflector, cache = reflect(backoff_initial=0.01, backoff_max=0.2)
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    with api.failing(500):
        api.drop_watches()
        api.create("priorityclasses", pc("while-failing", 1))
        api.delete("priorityclasses", "system-node-critical")  # the test server allows it; so be it
        wait_for(lambda: metric("priority_webhook_cache_reconnects_total", reflector) >= 6)
        assert "while-failing" not in {o["metadata"]["name"] for o in cache.list()}  # served stale meanwhile
    converge(cache, api)
    failed = [r for r in api.requests if r.status == 500]
    assert len(failed) >= 5


def test_stalled_api_is_detected_by_the_read_timeout(api: KubeAPIServer, reflect) -> None:
    # The guard on a watch is its timeoutSeconds (1-2 s here) plus read_timeout.
    reflector, cache = reflect(read_timeout=0.5, timeout_seconds=1)
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    with api.stalled():  # the open watch goes silent: no events, no bookmarks, no close
        api.create("priorityclasses", pc("hidden", 1))
        wait_for(lambda: metric("priority_webhook_cache_reconnects_total", reflector) >= 2, timeout=10)
        assert cache.get("", "hidden") is None
    converge(cache, api)


def test_not_synced_while_the_api_fails_from_the_start(api: KubeAPIServer, reflect) -> None:
    with api.failing(500):
        reflector, cache = reflect()
        wait_for(lambda: metric("priority_webhook_cache_reconnects_total", reflector) >= 2)
        assert not reflector.synced
        assert not reflector.wait_synced(0.05)
        assert metric("priority_webhook_cache_synced", reflector) == 0
    assert reflector.wait_synced(5)
    assert metric("priority_webhook_cache_synced", reflector) == 1
    converge(cache, api)


def test_unreachable_api_retries_until_it_answers(new_api: Callable[..., KubeAPIServer], reflect) -> None:
    api = new_api()
    reflector, _ = reflect(server=api.start())
    assert reflector.wait_synced(5)
    api.stop()  # connection refused from now on
    wait_for(lambda: metric("priority_webhook_cache_reconnects_total", reflector) >= 2)
    assert reflector.synced  # synced stays true: the last known state is served


# -- auth, lifecycle, metrics ------------------------------------------------------------------------------
def test_kubeconfig_token_is_sent_and_never_logged(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with KubeAPIServer(token="top-secret-token") as api:
        reflector = Reflector(
            api_client(api.kubeconfig(tmp_path / "kubeconfig"), False),
            PCS,
            ObjectCache(),
            name=unique("auth"),
            **FAST,
        )
        reflector.start()
        try:
            assert reflector.wait_synced(5)  # the token from the kubeconfig was accepted
            wait_for(lambda: api.open_watches == 1)  # else the drop below could miss a watch still opening
            api.token = "rotated-token"  # from now on ours is refused
            api.drop_watches()
            wait_for(lambda: "HTTP 401" in caplog.text, what="the refused token in the log")
            assert metric("priority_webhook_cache_reconnects_total", reflector) >= 2
        finally:
            reflector.stop(5)
    assert "top-secret-token" not in caplog.text


def test_stop_interrupts_an_open_watch_at_once(api: KubeAPIServer, client: rest.Client) -> None:
    reflector = Reflector(client, PCS, ObjectCache(), name=unique("stopper"), read_timeout=60)
    reflector.start()
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    reflector.stop(timeout=5)
    assert reflector._thread is not None and not reflector._thread.is_alive()


def test_backoff_is_exponential_jittered_and_capped() -> None:
    reflector = Reflector(None, PCS, ObjectCache(), name="backoff", backoff_initial=0.1, backoff_max=2.0)
    delays = [reflector._next_backoff() for _ in range(12)]
    steps = [min(2.0, 0.1 * 2**i) for i in range(12)]
    assert all(step / 2 <= delay <= step for delay, step in zip(delays, steps, strict=True))
    assert max(delays) <= 2.0
    assert len(set(delays)) > 1


def test_metrics_follow_the_cache(api: KubeAPIServer, reflect) -> None:
    reflector, _ = reflect()
    assert reflector.wait_synced(5)
    assert metric("priority_webhook_cache_objects", reflector) == 2
    api.create("priorityclasses", pc("a", 1))
    api.create("priorityclasses", pc("b", 1))
    api.delete("priorityclasses", "a")
    wait_for(lambda: metric("priority_webhook_cache_watch_events_total", reflector, type="DELETED") == 1)
    assert metric("priority_webhook_cache_watch_events_total", reflector, type="ADDED") == 2
    assert metric("priority_webhook_cache_objects", reflector) == 3
    stamp = metric("priority_webhook_cache_last_activity_timestamp_seconds", reflector)
    assert stamp > 0
    wait_for(
        lambda: metric("priority_webhook_cache_last_activity_timestamp_seconds", reflector) > stamp,
        what="bookmarks keep the activity timestamp fresh",
    )


@pytest.mark.parametrize("client_certificates", [False, True], ids=["ca-only", "client-certificate"])
def test_tls_ca_and_client_certificate_come_from_the_kubeconfig(tmp_path, client_certificates: bool) -> None:
    with KubeAPIServer(tls=True, client_certificates=client_certificates, bookmark_interval=0.2) as api:
        client = api_client(api.kubeconfig(tmp_path / "kubeconfig"), False)
        cache = ObjectCache()
        reflector = Reflector(client, PCS, cache, name=unique("tls"), **FAST)
        reflector.start()
        try:
            assert reflector.wait_synced(5)
            api.create("priorityclasses", pc("over-tls", 1))
            converge(cache, api)
        finally:
            reflector.stop(5)


def test_tls_without_the_client_certificate_is_refused(tmp_path) -> None:
    with KubeAPIServer(client_certificates=True) as api:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig", with_client_certificate=False)
        reflector = Reflector(
            api_client(kubeconfig, False), PCS, ObjectCache(), name=unique("tls-refused"), **FAST
        )
        reflector.start()
        try:
            wait_for(lambda: metric("priority_webhook_cache_reconnects_total", reflector) >= 2)
            assert not reflector.synced
        finally:
            reflector.stop(5)


# -- where the LIST is served from -------------------------------------------------------------------------
def list_versions(api: KubeAPIServer, path: str = PCS) -> list[str]:
    """The resourceVersion each LIST of `path` asked for, in order."""
    return [r.query.get("resourceVersion", "") for r in api.requests if r.path == path and not r.watch]


def test_lists_are_consistent_reads_by_default(api: KubeAPIServer, reflect) -> None:
    reflector, _ = reflect()
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    api.expire_watches()
    wait_for(lambda: api.list_count(PCS) == 2)
    assert list_versions(api) == ["", ""]


def test_from_the_watch_cache_the_first_list_asks_for_0_and_a_relist_for_the_last_version_seen(
    api: KubeAPIServer, reflect
) -> None:
    reflector, cache = reflect(list_from_watch_cache=True)
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    api.create("priorityclasses", pc("seen", 1))
    converge(cache, api)
    seen = reflector.resource_version
    api.stall()  # the relist must not race a new event: it asks for exactly the version the cache held
    api.expire_watches()
    api.release()
    wait_for(lambda: api.list_count(PCS) == 2)
    converge(cache, api)
    assert list_versions(api) == ["0", seen]


def test_from_the_watch_cache_a_list_the_cache_cannot_serve_falls_back_to_one_consistent_read(
    api: KubeAPIServer, reflect
) -> None:
    def cached_list(record: RequestRecord) -> bool:
        return not record.watch and record.query.get("resourceVersion") == "0"

    api.create("priorityclasses", pc("high", 1000))
    api.fail_next(1, 410, match=cached_list)
    reflector, cache = reflect(list_from_watch_cache=True)
    assert reflector.wait_synced(5)
    converge(cache, api)
    assert list_versions(api) == ["0", ""]
    wait_for(lambda: api.open_watches == 1)
    api.stall()
    api.expire_watches()
    api.release()
    wait_for(lambda: api.list_count(PCS) == 3)
    assert list_versions(api)[2] not in ("", "0")  # back to the watch cache once a read succeeded


# -- an hour of quiet, compressed --------------------------------------------------------------------------
HOUR_SCALE = 0.005  # one API second is 5 ms: an hour of 5-10 minute watches in 18 s


@pytest.mark.parametrize("bookmark_every", [math.inf, 60 * HOUR_SCALE], ids=["no-bookmarks", "bookmark-1min"])
def test_after_an_hour_of_quiet_every_worker_sees_a_change_within_a_second(
    bookmark_every: float,
    new_api: Callable[..., KubeAPIServer],
    connect: Callable[[KubeAPIServer], rest.Client],
) -> None:
    """The production settings (timeouts and backoff as `serve` uses them, the client's read timeout scaled
    with the API server's clock) on a cluster where nothing changes for an hour. Every watch ends by the
    server's timeoutSeconds and is re-opened at once: no failure, no backoff, a watch always open. A quiet
    watch used to be cut by the 75 s read timeout and counted as a failure, so the retry delay grew to its
    cap and no watch was open while it waited (a class change was seen up to 30 s late)."""
    from webhook.kube.class_store import ClusterClassStore

    with new_api(bookmark_interval=bookmark_every, time_scale=HOUR_SCALE) as api:
        stores = [
            ClusterClassStore(connect(api), name=unique(f"worker-{i}"), read_timeout=75 * HOUR_SCALE)
            for i in range(4)
        ]
        for store in stores:
            store.start()
        try:
            assert all(store.wait_ready(10) for store in stores)
            hour_ends = time.monotonic() + 3600 * HOUR_SCALE
            wait_for(lambda: time.monotonic() >= hour_ends, timeout=3600 * HOUR_SCALE + 5, interval=0.1)
            reflectors = [store.reflector for store in stores]
            # 4 workers, 6 to 12 watches an hour each (the first one, then one per server timeout)
            assert 4 * 6 <= api.watch_count(PCS) <= 4 * 13
            assert [metric("priority_webhook_cache_reconnects_total", r) for r in reflectors] == [0] * 4
            wait_for(lambda: api.open_watches == 4, timeout=5, what="a watch open on every worker")
            changed = time.monotonic()
            api.create("priorityclasses", pc("after-the-quiet-hour", 7, globalDefault=True))
            wait_for(
                lambda: all("after-the-quiet-hour" in store.snapshot() for store in stores),
                timeout=30,
                interval=0.005,
            )
            seen = time.monotonic() - changed
            assert seen < 1.0, f"seen by every worker after {seen:.2f}s"
            assert api.list_count(PCS) == 4  # one LIST each: watches were resumed, never re-listed
        finally:
            for store in stores:
                store.stop()


# -- how long it waits before retrying, by what went wrong -----------------------------------------------------
DELAY = re.compile(r"retrying in (\d+\.\d+)s")


def logged_delays(caplog: pytest.LogCaptureFixture, reflector: Reflector) -> list[float]:
    return [
        float(found.group(1))
        for record in caplog.records
        if record.getMessage().startswith(f"{reflector.name}:")
        and (found := DELAY.search(record.getMessage()))
    ]


@pytest.mark.parametrize(
    ("err", "cap"),
    [
        (rest.Unreachable("connection refused", "NewConnectionError"), 1.0),
        (rest.ReadTimeout("read timed out", "ReadTimeoutError"), 1.0),
        (rest.Broken("connection broken: IncompleteRead", "IncompleteRead"), 1.0),
        (rest.ApiError(500, message="etcdserver: request timed out"), 1.0),
        (rest.ApiError(503, message="not ready"), 1.0),
        (rest.ApiError(429, "TooManyRequests"), 30.0),
        (rest.ApiError(403, "Forbidden"), 30.0),
        (rest.NotJSON("bad JSON"), 30.0),
        (ValueError("an ERROR event"), 30.0),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_the_retry_cap_is_short_only_while_the_api_server_is_down(err: Exception, cap: float) -> None:
    assert retry_cap(err, backoff_max=30.0, reconnect_max=1.0) == cap
    assert retry_cap(err, backoff_max=0.5, reconnect_max=1.0) == 0.5  # never above backoff_max


def test_while_the_api_server_fails_the_retries_stay_under_the_reconnect_cap(
    api: KubeAPIServer, reflect, caplog: pytest.LogCaptureFixture
) -> None:
    """A deleted class must not outlive the API server's return by a long backoff: with 500s the waits stay
    at `reconnect_max`, however many failures; the change made meanwhile arrives once it answers."""
    caplog.set_level(logging.WARNING, logger="webhook.kube.reflector")
    reflector, cache = reflect(backoff_initial=0.05, backoff_max=30.0, reconnect_max=0.2)
    assert reflector.wait_synced(5)
    wait_for(lambda: api.open_watches == 1)
    with api.failing(500):
        api.drop_watches()
        api.delete("priorityclasses", "system-node-critical")
        wait_for(lambda: len(logged_delays(caplog, reflector)) >= 8, timeout=20)
    delays = logged_delays(caplog, reflector)
    assert max(delays) <= 0.2, delays
    converge(cache, api)


def test_a_refusing_api_server_gets_the_full_exponential_backoff(
    api: KubeAPIServer, reflect, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="webhook.kube.reflector")
    with api.failing(429):
        reflector, _ = reflect(backoff_initial=0.05, backoff_max=30.0, reconnect_max=0.2)
        wait_for(lambda: len(logged_delays(caplog, reflector)) >= 5, timeout=20)
    delays = logged_delays(caplog, reflector)
    assert 0.4 <= delays[4] <= 0.8, delays  # the fifth step, 0.05 * 2**4 with jitter: past the reconnect cap
