"""Reading Kubernetes objects from files: YAML or JSON, one or many documents, or a `v1 List`.

This is the input edge shared by every command; `-` is standard input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

import yaml


class InputError(ValueError):
    """Bad command-line input; the message is one line naming the file and the problem."""


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise InputError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def parse_documents(text: str, source: str) -> list[Any]:
    """Every non-empty document in `text`, with `v1 List` items flattened in order."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            docs = [json.loads(text)]
        else:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{source}: not valid YAML or JSON: {detail}") from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply") from None
    out: list[Any] = []
    for doc in docs:
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
        return items
    return [doc]


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
