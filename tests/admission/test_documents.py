"""Reading objects from files: YAML, JSON, several documents, Lists, and bad input."""

from __future__ import annotations

import pytest

from webhook.files.documents import InputError, load_objects, load_one, parse_documents


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('{"kind": "Pod", "metadata": {"name": "a"}}', ["a"]),
        ("kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n", ["a", "b"]),
        ("---\n---\nkind: Pod\nmetadata: {name: a}\n---\n", ["a"]),
        (
            '{"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}',
            ["a", "b"],
        ),
        ("kind: PodList\nitems:\n- metadata: {name: a}\n", ["a"]),
        ("kind: List\nitems: null\n", []),
        ('[{"metadata": {"name": "a"}}]', ["a"]),
    ],
)
def test_parse_documents(text, names):
    assert [d["metadata"]["name"] for d in parse_documents(text, "f")] == names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [", "f: not valid YAML or JSON"),
        ('{"a": ', "f: not valid YAML or JSON"),
        ("kind: List\nitems: 3\n", "f: items: must be a list"),
        ("[" * 100000, "f: "),
    ],
)
def test_parse_errors_are_one_line(text, message):
    with pytest.raises(InputError) as err:
        parse_documents(text, "f")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_load_one_wants_exactly_one(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(InputError, match="expected one pod, found 2 documents"):
        load_one(str(path), "pod")


def test_sources_name_file_and_document(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n---\nb: 2\n")
    assert [s for s, _ in load_objects([str(path)])] == [f"{path}: document 1", f"{path}: document 2"]


def test_binary_file(tmp_path):
    path = tmp_path / "bin"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8 text"):
        load_objects([str(path)])
