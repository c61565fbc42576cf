"""Reading Kubernetes objects from files: YAML or JSON, one or many documents, or a `v1 List`.

This is the input edge shared by every command; `-` is standard input.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Hashable, Iterable
from typing import Any

import yaml

from webhook.files import InputError as InputError  # its home; most readers of files import it from here


def file_error(path: str, err: OSError) -> InputError:
    """One wording for a file that cannot be read, whichever reader met it."""
    if isinstance(err, FileNotFoundError):
        return InputError(f"{path}: not found")
    return InputError(f"{path}: {err.strerror or err}")


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise file_error(path, err) from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


# Limits on what a file may make of itself once parsed. Real Kubernetes objects nest a few dozen levels at
# most; deeper input would only exhaust the interpreter's stack later (copying, printing). Aliases are
# YAML's way to make a small file expand into a huge document ("billion laughs"); like kubectl's YAML
# reader (go-yaml's "excessive aliasing" guard) we refuse a document whose aliases expand it too far.
MAX_DEPTH = 100
MAX_ALIASED_VALUES = 1_000_000


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (go-yaml, hence kubectl, does too) and counts aliases."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # SafeLoader reports unhashable keys itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"mapping key {key!r} already defined", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"mapping key {key!r} already defined")
        out[key] = value
    return out


class _DocumentError(ValueError):
    """A YAML error in document `number` (1-based, counting every document of the stream)."""

    def __init__(self, number: int, err: yaml.YAMLError) -> None:
        super().__init__(str(err))
        self.number = number
        self.err = err


def _yaml_documents(text: str) -> list[tuple[Any, bool]]:
    """(document, whether it used aliases) for every document."""
    loader = _Loader(text)
    out = []
    number = 1
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            loader.aliases = 0
            doc = loader.get_data()
            out.append((doc, loader.aliases > 0))
            number += 1
    except yaml.YAMLError as err:
        raise _DocumentError(number, err) from None
    finally:
        loader.dispose()
    return out


# `{{ .Values.x }}`: a Helm (Go) template action, left in a file that was never rendered.
_TEMPLATE_ACTION = re.compile(r"\{\{-?\s*[^{}]*?\s*-?\}\}")


def _unrendered(text: str, source: str) -> InputError | None:
    """A clear error for a template given as a manifest: its first action and where it is."""
    found = _TEMPLATE_ACTION.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    action = found.group(0) if len(found.group(0)) <= 60 else found.group(0)[:57] + "..."
    return InputError(
        f"{source}: line {line}: {action}: an unrendered template; render it first (helm template ...)"
    )


def _check_shape(doc: Any, source: str, aliased: bool) -> None:
    """Iteratively (no recursion): depth within MAX_DEPTH, aliased expansion within MAX_ALIASED_VALUES."""
    stack = [(doc, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if aliased and count > MAX_ALIASED_VALUES:
            raise InputError(f"{source}: YAML aliases expand the document beyond {MAX_ALIASED_VALUES} values")
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise InputError(f"{source}: nested too deeply (over {MAX_DEPTH} levels)")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


def _yaml_error(err: yaml.YAMLError) -> str:
    """The problem and where, on one line (PyYAML's first line is often only the context)."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{err.problem}{where}"
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def parse_documents(text: str, source: str) -> list[Any]:
    """Every non-empty document in `text`, with `v1 List` items flattened in order."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            docs = [(json.loads(text, object_pairs_hook=_no_duplicate_keys), False)]
        else:
            docs = [(d, aliased) for d, aliased in _yaml_documents(text) if d is not None]
    except _DocumentError as err:  # the document is named once there is more than one
        where = f"{source}: document {err.number}" if err.number > 1 else source
        raise _unrendered(text, source) or InputError(
            f"{where}: not valid YAML or JSON: {_yaml_error(err.err)}"
        ) from None
    except yaml.YAMLError as err:
        raise _unrendered(text, source) or InputError(
            f"{source}: not valid YAML or JSON: {_yaml_error(err)}"
        ) from None
    except ValueError as err:  # json.JSONDecodeError and duplicate keys
        raise _unrendered(text, source) or InputError(
            f"{source}: not valid YAML or JSON: {str(err).splitlines()[0]}"
        ) from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply") from None
    out: list[Any] = []
    for doc, aliased in docs:
        _check_shape(doc, source, aliased)
        out.extend(_flatten(doc, source))
    return out


def _flatten(doc: Any, source: str) -> Iterable[Any]:
    if isinstance(doc, list):  # a bare JSON array of objects
        return doc
    if isinstance(doc, dict) and (doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List")):
        items = doc.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise InputError(f"{source}: items: must be a list")
        return _typed_items(doc, items)
    return [doc]


def _typed_items(doc: dict[str, Any], items: list[Any]) -> list[Any]:
    """Items of a typed list (`PriorityClassList`, what `kubectl get --raw` prints) carry no kind of their
    own: they take the list's kind without `List`, and its apiVersion."""
    kind = doc.get("kind")
    if kind == "List" or not isinstance(kind, str):
        return items
    item_kind = kind.removesuffix("List")
    api_version = doc.get("apiVersion")
    out = []
    for item in items:
        if isinstance(item, dict) and "kind" not in item:
            typed = {"kind": item_kind, **item}
            if isinstance(api_version, str) and "apiVersion" not in item:
                typed = {"apiVersion": api_version, **typed}
            item = typed
        out.append(item)
    return out


def load_objects(paths: Iterable[str]) -> list[tuple[str, Any]]:
    """(source, document) for every document in every path, in order."""
    out: list[tuple[str, Any]] = []
    for path in paths:
        source = "<stdin>" if path == "-" else path
        for i, doc in enumerate(parse_documents(read_text(path), source), start=1):
            out.append((f"{source}: document {i}", doc))
    return out


def load_one(path: str, what: str) -> Any:
    """Exactly one object (e.g. `--pod FILE`)."""
    docs = load_objects([path])
    if len(docs) != 1:
        raise InputError(f"{path}: expected one {what}, found {len(docs)} documents")
    return docs[0][1]


def dump(obj: Any, fmt: str) -> str:
    """Output as kubectl prints it: JSON indented, or YAML block style."""
    if fmt == "json":
        return json.dumps(obj, indent=2) + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
