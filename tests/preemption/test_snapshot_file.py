"""Streaming a cluster dump in chunks: the same objects as the strict reader, in the same order, for every
layout and cut; duplicate keys and bad JSON refused with the strict reader's messages."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.preemption.planner_data.builders import LOW, L, node, pod
from webhook.files.documents import InputError, load_objects
from webhook.files.snapshot_file import stream_objects


def kubectl_list(*items):
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def owned(name, node_name, owners):
    """A pod whose ownerReferences look like items (apiVersion, kind, metadata...): a tempting wrong cut."""
    obj = pod(name, node_name, LOW, L, labels={"app": "web"})
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"x": 1}, "name": f"rs-{i}"}
        for i in range(owners)
    ]
    return obj


OBJECTS = [
    node("node1"),
    *[owned(f"p{i}", "node1", i % 3) for i in range(12)],
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "odd", "annotations": {"a": '}, {"apiVersion": x'}},
    },
    node("node2"),
]
LAYOUTS = {
    "compact": lambda doc: json.dumps(doc, separators=(",", ":")),
    "python": json.dumps,
    "kubectl": lambda doc: json.dumps(doc, indent=4, sort_keys=True),
    "items-first": lambda doc: json.dumps({"items": doc["items"], "kind": "List", "apiVersion": "v1"}),
    "yaml": lambda doc: yaml.safe_dump(doc),
    "array": lambda doc: json.dumps(doc["items"]),
    # As the API server writes list items: metadata first, no kind (plan --kubeconfig's objects gain it last).
    "api-server": lambda doc: json.dumps(
        {
            **doc,
            "items": [
                {
                    "metadata": o["metadata"],
                    **{k: v for k, v in o.items() if k not in ("metadata", "kind")},
                    "kind": o["kind"],
                }
                for o in doc["items"]
            ],
        }
    ),
}


def write(tmp_path, text, name="c.json"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("chunk", [1, 50, 300, 1 << 16])
def test_same_objects_and_sources_as_the_strict_reader(tmp_path, layout, chunk):
    path = write(tmp_path, LAYOUTS[layout](kubectl_list(*OBJECTS)))
    assert list(stream_objects(path, chunk_bytes=chunk)) == load_objects([path])


@pytest.mark.parametrize("layout", ["compact", "kubectl", "api-server"])
def test_real_layouts_are_read_in_many_chunks_not_whole(tmp_path, layout):
    """The chunks are cut between items (or the memory bound is lost): many progress calls, one per chunk."""
    path = write(tmp_path, LAYOUTS[layout](kubectl_list(*OBJECTS)))
    calls = []
    list(stream_objects(path, lambda done, total: calls.append(done), chunk_bytes=1))
    assert len(calls) >= len(OBJECTS) - 2  # nearly one chunk per item: ownerReferences are no cut


def test_progress_is_told_the_bytes_read(tmp_path):
    path = write(tmp_path, json.dumps(kubectl_list(*OBJECTS)))
    seen = []
    list(stream_objects(path, lambda done, total: seen.append((done, total)), chunk_bytes=200))
    size = (tmp_path / "c.json").stat().st_size
    assert len(seen) > 3 and seen == sorted(seen) and all(total == size for _, total in seen)


DUPLICATES = [
    ("in-an-item", lambda text: text.replace('"name": "p5"', '"name": "p5", "name": "p6"'), "'name'"),
    ("nested", lambda text: text.replace('"app": "web"', '"app": "web", "app": "db"', 1), "'app'"),
    ("top-level", lambda text: text.replace('"kind": "List"', '"kind": "List", "kind": "List"'), "'kind'"),
    ("twice-items", lambda text: text[:-1] + ', "items": []}', "'items'"),
]


@pytest.mark.parametrize(("edit", "key"), [pytest.param(*d[1:], id=d[0]) for d in DUPLICATES])
@pytest.mark.parametrize("chunk", [1, 1 << 16])
def test_duplicate_keys_are_refused_wherever_they_are(tmp_path, edit, key, chunk):
    path = write(tmp_path, edit(json.dumps(kubectl_list(*OBJECTS))))
    with pytest.raises(InputError) as err:
        list(stream_objects(path, chunk_bytes=chunk))
    assert str(err.value) == f"{path}: not valid YAML or JSON: mapping key {key} already defined"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace('"p7"', '"p7" oops'), "Expecting ',' delimiter"),
        (lambda text: text[: len(text) // 2], "Unterminated string"),
        (lambda text: text.replace("}]", "},]"), "Expecting value"),
    ],
)
def test_bad_json_gets_the_strict_readers_message(tmp_path, edit, message):
    path = write(tmp_path, edit(json.dumps(kubectl_list(*OBJECTS))))
    with pytest.raises(InputError, match=f"^{path}: not valid YAML or JSON: ") as err:
        list(stream_objects(path, chunk_bytes=100))
    with pytest.raises(InputError) as strict:
        load_objects([path])
    assert str(err.value) == str(strict.value)


@pytest.mark.parametrize(
    "special",
    [
        {"quote": "a\u0022b"},  # written as an escape by ensure_ascii: the quote count cannot see it
        {"nan": float("nan")},  # not JSON, but Python's reader (hence the strict one) takes it
    ],
)
def test_what_orjson_cannot_read_goes_to_the_strict_reader(tmp_path, special):
    objects = [*OBJECTS[:5], {**OBJECTS[5], "extra": special}, *OBJECTS[5:]]
    path = write(tmp_path, json.dumps(kubectl_list(*objects)).replace('a\\"b', "a\\u0022b"))
    streamed, strict = list(stream_objects(path, chunk_bytes=100)), load_objects([path])
    assert json.dumps(streamed) == json.dumps(strict)  # NaN is not equal to itself: compare as text


def test_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match=r"none\.json: not found"):
        list(stream_objects(str(tmp_path / "none.json")))
