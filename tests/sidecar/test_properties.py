"""Properties of the decisions over random node views: the safety rules hold whatever the module picks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sidecar.fixtures import node, pod, rejected
from webhook.sidecar.actions import DryRun, Evict, Hints, Settings, WriteRecord
from webhook.sidecar.decide import decide
from webhook.sidecar.lifecycle import TERMINATED, TERMINATING, is_static, lifecycle_state

PRIORITIES = st.sampled_from([None, 0, 10, 1000, 5000, 2_000_000_000, 2_000_001_000])


@st.composite
def views(draw):
    pods = []
    for i in range(draw(st.integers(0, 12))):
        phase = draw(st.sampled_from(["Running", "Running", "Pending", "Failed", "Succeeded"]))
        pods.append(
            pod(
                f"p{i}",
                cpu=draw(st.sampled_from([None, "50m", "100m", "250m", "500m"])),
                memory=draw(st.sampled_from([None, "64Mi", "256Mi"])),
                limits=draw(st.booleans()),
                priority=draw(PRIORITIES),
                phase=phase,
                running=draw(st.booleans()) if phase != "Running" else True,
                deleting=draw(st.booleans()),
                mirror=draw(st.integers(0, 9)) == 0,
            )
        )
    crit = [
        rejected(
            f"r{i}",
            cpu=draw(st.sampled_from(["100m", "400m", "900m"])),
            priority=draw(st.sampled_from([1000, 5000, 2_000_000_000, 2_000_001_000])),
            reason=draw(st.sampled_from(["OutOfcpu", "UnexpectedAdmissionError", "OutOfmemory"])),
        )
        for i in range(draw(st.integers(1, 2)))
    ]
    return pods + crit


@settings(max_examples=40, deadline=None)
@given(
    view=views(),
    order=st.sampled_from(["priority", "qos"]),
    threshold=st.sampled_from([1000, 2_000_000_000]),
    budget=st.integers(0, 5),
    dry_run=st.booleans(),
)
def test_safety_rules_hold(view, order, threshold, budget, dry_run):
    config = Settings(node_name="node-a", order=order, critical_priority=threshold, dry_run=dry_run)
    actions = decide(node(cpu="1", memory="1Gi"), view, config, Hints(eviction_budget=budget))
    evicts = [a for a in actions if isinstance(a, Evict)]
    if dry_run:
        assert evicts == [] and not any(isinstance(a, WriteRecord) for a in actions)
    assert len(evicts) <= budget
    victims = [a.victim["metadata"]["uid"] for a in evicts]
    assert len(victims) == len(set(victims)), "a pod is evicted at most once per pass"
    for action in (a for a in actions if isinstance(a, Evict | DryRun)):
        preemptor = action.pod["spec"]["priority"]
        for victim in [action.victim] if isinstance(action, Evict) else action.victims:
            assert lifecycle_state(victim) not in (TERMINATING, TERMINATED)
            assert not is_static(victim)
            priority = victim["spec"].get("priority") or 0
            assert priority < preemptor and priority < threshold
            assert victim["metadata"]["uid"] != action.pod["metadata"]["uid"]


class _Greedy:
    """A module that picks every pod it is given: only the sidecar's own safety layer stands in the way."""

    def __init__(self, pods):
        self.admit, self.fits, self.error, self.reasons = True, False, None, []
        self.requirements = [("cpu", 1)]
        self.victims = [
            {
                "uid": p["metadata"]["uid"],
                "namespace": p["metadata"]["namespace"],
                "name": p["metadata"]["name"],
            }
            for p in pods
            if (p.get("spec") or {}).get("priority") is None or p["spec"]["priority"] < 2_000_000_000
        ]


@settings(max_examples=40, deadline=None)
@given(view=views(), threshold=st.sampled_from([1000, 2_000_000_000]))
def test_safety_layer_refuses_what_a_careless_module_picks(view, threshold):
    config = Settings(node_name="node-a", critical_priority=threshold)
    actions = decide(node(), view, config, Hints(), admit=lambda pod, node, pods, **kw: _Greedy(pods))
    for action in (a for a in actions if isinstance(a, Evict)):
        victim, preemptor = action.victim, action.pod["spec"]["priority"]
        assert lifecycle_state(victim) not in (TERMINATING, TERMINATED)
        assert not is_static(victim)
        priority = victim["spec"].get("priority") or 0
        assert priority < preemptor and priority < threshold
