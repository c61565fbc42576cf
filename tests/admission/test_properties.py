"""Properties over random pods and class sets: idempotence, and agreement between the stages."""

from __future__ import annotations

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.admission.fixtures import pod_request
from webhook.policy.class_model import ClassSet, PriorityClass
from webhook.policy.pod_rules import PodOptions, admit_pod, validate_pod

names = st.sampled_from(["a", "b", "c", "system-cluster-critical", "system-node-critical"])
policies = st.sampled_from([None, "PreemptLowerPriority", "Never"])
classes = st.lists(
    st.builds(PriorityClass, names, st.integers(-10, 10) | st.just(2000000000), st.booleans(), policies),
    max_size=5,
)
pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.just("p"), "namespace": st.sampled_from(["kube-system", "ns"])},
            optional={
                "annotations": st.sampled_from(
                    [
                        {"scheduler.alpha.kubernetes.io/critical-pod": ""},
                        {"scheduler.alpha.kubernetes.io/critical-pod": "x"},
                        {},
                    ]
                )
            },
        )
    },
    optional={
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "priorityClassName": st.sampled_from(["", "a", "b", "missing", "system-cluster-critical"]),
                "priority": st.integers(-10, 10) | st.just(2000000000),
                "preemptionPolicy": policies.filter(bool),
            },
        )
    },
)


@settings(max_examples=300, deadline=None)
@given(pods, classes, st.booleans())
def test_admission_is_idempotent_and_final_state_validates(obj, class_list, legacy):
    class_set, options = ClassSet(class_list), PodOptions(legacy)
    first = admit_pod(pod_request(obj), class_set, options)
    if not first.allowed:
        assert first.code == 403 and first.message.startswith('pods "p" is forbidden: ')
        # Unless its mutation was skipped in a system namespace (fail open): then it is admitted as it is.
        skipped = obj["metadata"]["namespace"] in options.system_namespaces and (
            (obj.get("spec") or {}).get("priority") is None
        )
        assert validate_pod(pod_request(obj), class_set, options).allowed is skipped
        return
    result = jsonpatch.apply_patch(obj, list(first.patch))
    second = admit_pod(pod_request(result), class_set, options)
    assert second.allowed and second.patch == ()
    assert validate_pod(pod_request(result), class_set, options).allowed
    assert isinstance(result["spec"]["priority"], int)


@settings(max_examples=200, deadline=None)
@given(classes)
def test_default_is_the_lowest_global_default(class_list):
    class_set = ClassSet(class_list)
    default = class_set.default()
    defaults = [pc for pc in class_set.values() if pc.global_default]
    if not defaults:
        assert default is None
    else:
        assert default in defaults and all(default.value <= pc.value for pc in defaults)
