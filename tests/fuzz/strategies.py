"""Hypothesis strategies for hostile input: AdmissionReviews, Pods and PriorityClasses, broken on purpose.

Each strategy starts from a well-formed object (so the deep code paths are reached) and then damages it at
random places: wrong types, missing fields, nulls, huge strings, deep nesting, unicode, invalid quantities.
Raw-text strategies add what only a serialisation can carry: YAML aliases, tags, duplicate keys, non-UTF-8.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import yaml
from hypothesis import strategies as st

CLASS_NAMES = ["high", "low", "never", "system-cluster-critical", "system-node-critical", "missing", ""]
POLICIES = ["PreemptLowerPriority", "Never", "Sometimes", ""]
QUANTITIES = ["100m", "1", "1Gi", "1e3", "0.5", "2Ki", "-1", "1.5.5", "Gi", "1QQ", "", "∞", "1e999", "0x10"]
NAMESPACES = ["default", "kube-system", "shop", ""]

# Hostile leaves: boundaries of int32/int64, floats, odd strings.
special_ints = st.sampled_from(
    [0, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, 10**40, 1_000_000_001, 2000001000]
)
special_strings = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "a\nb",
        "\x00",
        "\ud7ff",
        "é",
        "🚀",
        "system-",
        "-" * 300,
        "{",
        "null",
        "true",
        "1e3",
        "💥\r\n",
    ]
)
long_key = "k" * 5000
hostile_keys = st.text(max_size=10) | special_strings | st.just(long_key)
huge_strings = st.sampled_from([10_000] * 4 + [100_000] * 2 + [1_000_000]).map(lambda n: "x" * n)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | special_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | special_strings
    | st.sampled_from(QUANTITIES)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int) -> Any:
    """A list nested `depth` levels (built iteratively: the point is to stress the reader, not the writer)."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


deep_values = st.sampled_from([50, 200, 400, 800]).map(nested) | st.sampled_from([50, 200, 400]).map(
    lambda d: nested_dict(d)
)


def nested_dict(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


# Mostly ordinary JSON values; huge and deep ones are the rarer (and slower) cases.
_HOSTILE = {"json": json_values, "huge": huge_strings, "deep": deep_values}
hostile_values = st.sampled_from(["json"] * 8 + ["huge", "deep"]).flatmap(_HOSTILE.__getitem__)


# ---- well-formed bases -------------------------------------------------------------------------------

resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(
            st.sampled_from(["cpu", "memory", "pods", "example.com/gpu"]),
            st.sampled_from(QUANTITIES),
            max_size=3,
        ),
        "limits": st.dictionaries(
            st.sampled_from(["cpu", "memory"]), st.sampled_from(QUANTITIES), max_size=2
        ),
    },
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["c", "d"]), "image": st.just("nginx")}, optional={"resources": resources}
    ),
    min_size=1,
    max_size=2,
)
metadata = st.fixed_dictionaries(
    {"name": st.sampled_from(["p", "web", "pod-1"])},
    optional={
        "namespace": st.sampled_from(NAMESPACES),
        "annotations": st.sampled_from(
            [
                {},
                {"scheduler.alpha.kubernetes.io/critical-pod": ""},
                {"scheduler.alpha.kubernetes.io/critical-pod": "x"},
            ]
        )
        | st.dictionaries(hostile_keys, scalars, max_size=2),
        "uid": st.uuids().map(str),
    },
)
pods = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod"), "metadata": metadata},
    optional={
        "spec": st.fixed_dictionaries(
            {"containers": containers},
            optional={
                "priorityClassName": st.sampled_from(CLASS_NAMES),
                "priority": st.integers(-10, 10) | special_ints,
                "preemptionPolicy": st.sampled_from(POLICIES),
                "nodeName": st.just("node-1"),
            },
        )
    },
)
# Allowed-namespaces rules: well formed, malformed, huge, or any text at all.
class_annotations = st.fixed_dictionaries(
    {},
    optional={
        "priority-webhook.io/allowed-namespaces": st.sampled_from(
            ["tier=gold", "tier in (gold,silver),!sandbox", "", "tier in gold", "x" * 300, "a in (b,,)"]
        )
        | st.text(max_size=40)
        | scalars,
        "priority-webhook.io/enforcement": st.sampled_from(["deny", "audit", "Audit", ""]) | scalars,
    },
)
priority_classes = st.fixed_dictionaries(
    {
        "apiVersion": st.just("scheduling.k8s.io/v1"),
        "kind": st.just("PriorityClass"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from([*CLASS_NAMES, "system-x", "a" * 254])},
            optional={"annotations": class_annotations},
        ),
    },
    optional={
        "value": st.integers(-10, 10) | special_ints,
        "globalDefault": st.booleans(),
        "preemptionPolicy": st.sampled_from(POLICIES),
        "description": st.text(max_size=10),
    },
)


@st.composite
def reviews_of_valid_shape(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Pod"] * 5 + ["PriorityClass"] * 4 + ["Other"]))
    operation = draw(st.sampled_from(["CREATE"] * 5 + ["UPDATE"] * 3 + ["DELETE", "CONNECT"]))
    if kind == "Pod":
        group, resource, make = "", "pods", pods
    elif kind == "PriorityClass":
        group, resource, make = "scheduling.k8s.io", "priorityclasses", priority_classes
    else:
        group, resource, make = "apps", "deployments", st.fixed_dictionaries({"kind": st.just("Deployment")})
    obj = None if operation == "DELETE" else draw(make)
    old = draw(make) if operation in ("UPDATE", "DELETE") else None
    request: dict[str, Any] = {
        "uid": draw(st.uuids().map(str) | st.text(min_size=1, max_size=40)),
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "operation": operation,
        "namespace": draw(st.sampled_from(NAMESPACES)),
        "name": draw(st.sampled_from(["p", "high", "system-node-critical", ""])),
        "object": obj,
        "oldObject": old,
        "dryRun": draw(st.booleans()),
    }
    if draw(st.booleans()):
        request["subResource"] = draw(st.sampled_from(["", "status", "binding", "eviction"]))
    version = draw(st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]))
    return {"apiVersion": version, "kind": "AdmissionReview", "request": request}


# ---- damage ------------------------------------------------------------------------------------------


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every container path in `doc` (the root included) down to 12 levels: deep values stay opaque."""
    yield prefix
    if len(prefix) >= 12:
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(value, dict | list):
                yield from paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            if isinstance(value, dict | list):
                yield from paths(value, (*prefix, i))


def at(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def damaged(draw: st.DrawFn, base: st.SearchStrategy[Any], max_edits: int = 3) -> Any:
    """`base` with 1..max_edits random edits: a member replaced by a hostile value, deleted, or added."""
    doc = copy.deepcopy(draw(base))
    for _ in range(draw(st.integers(1, max_edits))):
        candidates = [p for p in paths(doc) if at(doc, p)]  # non-empty containers
        if not candidates:
            break
        target = at(doc, draw(st.sampled_from(candidates)))
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["replace", "replace", "delete", "null", "add"]))
        if action == "replace":
            target[key] = draw(hostile_values)
        elif action == "null":
            target[key] = None
        elif action == "delete":
            del target[key]
        elif isinstance(target, dict):
            target[draw(hostile_keys)] = draw(hostile_values)
        else:
            target.append(draw(hostile_values))
    return doc


admission_reviews = reviews_of_valid_shape() | damaged(reviews_of_valid_shape())
objects = pods | priority_classes | damaged(pods) | damaged(priority_classes) | json_values


# ---- raw text ----------------------------------------------------------------------------------------

YAML_ODDITIES = [
    # aliases, including an exponential "billion laughs"
    "a: &x [1, 2]\nb: *x\nkind: Pod\n",
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\nkind: Pod\nmetadata: {name: p}\n"
    "spec: {containers: *h}\n",
    "kind: Pod\nmetadata: &m {name: p, annotations: *m}\n",
    "&r [*r]\n",
    # tags: unsafe, unknown, and standard ones with wrong content
    "!!python/object/apply:os.system ['true']\n",
    "kind: !!python/name:os.system Pod\n",
    "kind: !custom Pod\n",
    "kind: Pod\nspec: {priority: !!float 1}\n",
    "kind: Pod\nspec: {priority: !!binary aGVsbG8=}\n",
    "kind: Pod\nmetadata: {name: !!timestamp 2001-12-14}\n",
    "kind: PriorityClass\nmetadata: {name: x}\nvalue: !!int 0x10\n",
    "kind: Pod\nspec: !!set {a, b}\n",
    # duplicate keys, merge keys, complex keys
    "kind: Pod\nkind: PriorityClass\nmetadata: {name: a}\nmetadata: {name: b}\nvalue: 1\n",
    "base: &b {name: p}\nkind: Pod\nmetadata: {<<: *b}\n",
    "? [a, b]\n: c\nkind: Pod\n",
    "kind: Pod\nmetadata: {name: p, annotations: {[1]: x}}\n",
    # YAML 1.1 booleans and numbers that are not what they look like
    "kind: PriorityClass\nmetadata: {name: yes}\nvalue: 0o17\nglobalDefault: yes\n",
    "kind: PriorityClass\nmetadata: {name: on}\nvalue: 1_000\nglobalDefault: On\n",
    "kind: Pod\nmetadata: {name: null}\nspec: {priority: .inf}\n",
    "kind: Pod\nspec: {priority: .nan}\n",
    # documents and directives
    "%YAML 1.1\n---\nkind: Pod\n...\n---\n",
    "---\n---\n---\n",
    "--- |\n  text\n",
    "kind: List\nitems: {a: 1}\n",
    "kind: List\nitems: [1, null, [2]]\n",
    "kind: PodList\nitems: [{kind: Pod, metadata: {name: p}}]\n",
    # broken syntax
    "kind: Pod\n  bad indent: [\n",
    "\t kind: Pod\n",
    '{"kind": "Pod",}',
    "[1, 2",
    '{"kind": "Pod", "spec": {"priority": NaN}}',
    '{"kind": "Pod", "spec": {"priority": 1e400}}',
    "\ufeffkind: Pod\nmetadata: {name: bom}\n",
]

non_utf8 = st.sampled_from(
    [b"\xff\xfe\x00k\x00i\x00n\x00d", b"kind: Pod\nmetadata: {name: \xe9}\n", b"\xc3\x28", b"\x80" * 10]
)


def to_text(doc: Any, fmt: str) -> str:
    if fmt == "yaml":
        try:
            return yaml.safe_dump(doc, allow_unicode=True)
        except RecursionError:  # the YAML writer recurses deeper than the JSON one; JSON is YAML too
            pass
    return json.dumps(doc)


@st.composite
def document_bytes(draw: st.DrawFn, docs: st.SearchStrategy[Any]) -> bytes:
    """A file's content: one or several documents as JSON or YAML, a List, an oddity, or broken bytes."""
    choice = draw(st.sampled_from(["one", "one", "several", "list", "oddity", "non-utf8", "truncated"]))
    if choice == "oddity":
        return draw(st.sampled_from(YAML_ODDITIES)).encode()
    if choice == "non-utf8":
        return draw(non_utf8)
    if choice == "several":
        items = draw(st.lists(docs, min_size=2, max_size=3))
        return "---\n".join(to_text(d, "yaml") for d in items).encode()
    if choice == "list":
        items = draw(st.lists(docs, max_size=3))
        return to_text(
            {"apiVersion": "v1", "kind": "List", "items": items}, draw(st.sampled_from(["json", "yaml"]))
        ).encode()
    text = to_text(draw(docs), draw(st.sampled_from(["json", "yaml"])))
    if choice == "truncated" and len(text) > 1:
        text = text[: draw(st.integers(1, len(text) - 1))]
    return text.encode()


# ---- node-side and cluster snapshots (victims, plan) -----------------------------------------------

nodes = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Node"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["node-1", "node-2"])}, optional={"labels": st.just({"zone": "a"})}
        ),
        "status": st.fixed_dictionaries(
            {
                "allocatable": st.fixed_dictionaries(
                    {
                        "cpu": st.sampled_from(["2", "500m", "1", *QUANTITIES]),
                        "memory": st.sampled_from(["1Gi", "4Gi", "100Mi"]),
                        "pods": st.sampled_from(["110", "2", "0"]),
                    }
                )
            },
        ),
    },
    optional={
        "spec": st.sampled_from(
            [{}, {"unschedulable": True}, {"taints": [{"key": "k", "effect": "NoSchedule"}]}]
        )
    },
)


@st.composite
def bound_pods(draw: st.DrawFn) -> dict[str, Any]:
    """A pod bound to a node, with a phase, as `kubectl get pods -o json` shows it."""
    obj = copy.deepcopy(draw(pods))
    spec = obj.setdefault("spec", {"containers": [{"name": "c", "image": "nginx"}]})
    spec["nodeName"] = draw(st.sampled_from(["node-1", "node-2"]))
    obj["metadata"]["name"] = draw(st.sampled_from(["a", "b", "c", "d"]))
    obj["metadata"].setdefault("namespace", "default")
    obj["metadata"]["labels"] = draw(st.sampled_from([{}, {"app": "web"}]))
    obj["status"] = {"phase": draw(st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]))}
    return obj


pdbs = st.fixed_dictionaries(
    {
        "apiVersion": st.just("policy/v1"),
        "kind": st.just("PodDisruptionBudget"),
        "metadata": st.fixed_dictionaries({"name": st.just("guard"), "namespace": st.just("default")}),
        "spec": st.fixed_dictionaries(
            {"selector": st.just({"matchLabels": {"app": "web"}})},
            optional={"minAvailable": st.sampled_from([1, "50%", 0])},
        ),
    },
    optional={"status": st.fixed_dictionaries({"disruptionsAllowed": st.integers(-1, 2)})},
)
node_side_objects = (
    nodes | bound_pods() | pdbs | damaged(nodes) | damaged(bound_pods()) | damaged(pdbs) | json_values
)
