"""Lifecycle states, trigger detection, the preemption record and the eviction rate limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sidecar.fixtures import pod, rejected
from webhook.sidecar import record as rec
from webhook.sidecar.lifecycle import holds_resources, is_static, lifecycle_state, state_counts
from webhook.sidecar.ratelimit import EvictionRateLimit
from webhook.sidecar.trigger import rejected_resource, rejection


@pytest.mark.parametrize(
    ("obj", "state", "holds"),
    [
        (pod("p", phase="Pending", running=False), "desired", True),
        (pod("p", phase="Pending", running=True), "active", True),  # a container started already
        (pod("p", phase="Running"), "active", True),
        (pod("p", phase="Unknown", running=False), "active", True),  # node lost contact: still held
        (pod("p", phase="Running", deleting=True), "terminating", True),
        (pod("p", phase="Pending", running=False, deleting=True), "terminating", True),
        (pod("p", phase="Failed", running=True), "terminating", True),  # killed, containers still up
        (pod("p", phase="Failed", running=False), "terminated", False),
        (pod("p", phase="Succeeded", running=False, deleting=True), "terminated", False),
        (rejected("r"), "terminated", False),  # a kubelet rejection never ran
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_lifecycle(obj, state, holds):
    assert lifecycle_state(obj) == state
    assert holds_resources(obj) is holds


def test_state_counts_cover_every_combination():
    counts = state_counts([pod("a"), pod("b", mirror=True), pod("c", deleting=True), rejected("d")])
    assert len(counts) == 8
    assert counts[("active", False)] == 1
    assert counts[("active", True)] == 1
    assert counts[("terminating", False)] == 1
    assert counts[("terminated", False)] == 1
    assert sum(counts.values()) == 4


def test_static_means_mirror_or_file_source():
    assert is_static(pod("m", mirror=True))
    file_pod = pod("f")
    file_pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "file"
    assert is_static(file_pod)
    api_pod = pod("a")
    api_pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "api"
    assert not is_static(api_pod)


@pytest.mark.parametrize(
    ("reason", "resource"),
    [
        ("OutOfcpu", "cpu"),
        ("OutOfmemory", "memory"),
        ("OutOfpods", "pods"),
        ("OutOfephemeral-storage", "ephemeral-storage"),
        ("OutOfnvidia.com/gpu", "nvidia.com/gpu"),
        ("OutOf", None),
        ("UnexpectedAdmissionError", None),
        ("NodeAffinity", None),
    ],
)
def test_rejected_resource(reason, resource):
    assert rejected_resource(reason) == resource


@pytest.mark.parametrize(
    ("obj", "threshold", "acts"),
    [
        (rejected("r"), 2_000_000_000, True),
        (rejected("r", reason="OutOfmemory"), 2_000_000_000, True),
        (rejected("r", reason="OutOfnvidia.com/gpu"), 2_000_000_000, True),
        (rejected("r", reason="UnexpectedAdmissionError"), 2_000_000_000, True),
        (rejected("r", reason="NodeAffinity"), 2_000_000_000, False),
        (rejected("r", reason="TaintToleration"), 2_000_000_000, False),
        (rejected("r", reason="OutOf"), 2_000_000_000, False),
        (rejected("r", priority=1_999_999_999), 2_000_000_000, False),
        (rejected("r", priority=1000), 1000, True),
        (rejected("r", priority=999), 1000, False),
        (rejected("r", node_name="node-b"), 2_000_000_000, False),
        (rejected("r", deleting=True), 2_000_000_000, False),
        (rejected("r", mirror=True), 2_000_000_000, False),  # left to the kubelet
        (pod("r", priority=2_000_000_000, phase="Running", reason="OutOfcpu"), 2_000_000_000, False),
        (pod("r", priority=None, phase="Failed", reason="OutOfcpu"), 0, False),  # nil priority
    ],
)
def test_trigger(obj, threshold, acts):
    assert (rejection(obj, "node-a", threshold) is not None) is acts


def test_trigger_carries_resource():
    found = rejection(rejected("r", reason="OutOfmemory"), "node-a", 2_000_000_000)
    assert found is not None and found.resource == "memory" and found.reason == "OutOfmemory"


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)


@settings(max_examples=50)
@given(
    state=st.sampled_from([rec.PREEMPTING, rec.DONE, rec.ABANDONED]),
    rnd=st.integers(0, 10),
    resource=st.sampled_from(["", "cpu", "memory", "nvidia.com/gpu"]),
    victims=st.lists(st.tuples(names, names, names), max_size=5),
)
def test_record_round_trip(state, rnd, resource, victims):
    original = rec.Record(state, rnd, resource, tuple(rec.Victim(*v) for v in victims))
    assert rec.parse(original.to_annotation()) == original


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"state": "maybe"}', "state: unknown value 'maybe'"),
        ('{"state": "done", "round": -1}', "round: must be a non-negative integer"),
        ('{"state": "done", "round": true}', "round: must be a non-negative integer"),
        ('{"state": "done", "resource": 5}', "resource: must be a string"),
        ('{"state": "done", "victims": {}}', "victims: must be a list"),
        (
            '{"state": "done", "victims": [{"uid": "u"}]}',
            "victims[0]: must have string uid, namespace and name",
        ),
    ],
)
def test_bad_record_names_the_problem(value, message):
    with pytest.raises(rec.BadRecord, match=message.replace("[", r"\[").replace("]", r"\]")):
        rec.parse(value)


def test_read_record_from_pod():
    assert rec.read(pod("p")) is None
    r = rec.Record(rec.DONE, 1, "cpu", (rec.Victim("u", "ns", "v"),))
    assert rec.read(pod("p", record=r)) == r


def test_rate_limit_sliding_window():
    limit = EvictionRateLimit(2, window=60.0)
    assert limit.available(0.0) == 2
    assert limit.take(0.0) and limit.take(10.0)
    assert not limit.take(20.0)
    assert limit.available(59.9) == 0
    assert limit.next_free(30.0) == 60.0
    assert limit.available(60.0) == 1  # the first one left the window
    assert limit.take(60.0)
    assert limit.next_free(60.0) == 70.0
    assert limit.available(130.0) == 2


@settings(max_examples=50)
@given(st.integers(1, 5), st.lists(st.floats(0, 300, allow_nan=False), max_size=40))
def test_rate_limit_never_exceeds_n_in_any_window(per_minute, times):
    limit = EvictionRateLimit(per_minute)
    taken = [t for t in sorted(times) if limit.take(t)]
    for start in taken:
        assert sum(1 for t in taken if start <= t < start + 60.0) <= per_minute


def test_rate_limit_rejects_zero():
    with pytest.raises(ValueError, match="at least 1"):
        EvictionRateLimit(0)
