"""A List answer decoded one item at a time, each item handed on as soon as it is decoded.

A reflector's LIST (a node's 110 pods: about 0.7 MiB of JSON) decoded at once is about 4 MiB of objects
alive together, when a cache keeps only part of each (webhook.sidecar.pod_fields); once they are freed,
about 2 MiB of it stays with Python's allocator for good, in pages still holding a few live objects.
Decoded item by item, each item is trimmed (`each`) before the next is decoded, so only one pod's objects
are ever alive beside what is kept, and the pages they used are reused by the next.

Every value is decoded by the standard library's JSON decoder (`raw_decode`, its C scanner); this module
only walks the top-level object and the `items` array between them. Like orjson (rest's decoder) it
rejects NaN and Infinity, bytes that are not UTF-8 and anything after the document (an integer beyond
64 bits, which the API server never writes, stays an integer here where orjson makes it a float).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as the decoder's own scanner skips it


def _skip(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not whitespace."""
    match = _WHITESPACE.match(text, at)  # `*`: always a match, maybe empty
    return match.end() if match else at


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def decode(raw: bytes, each: Callable[[Any], Any]) -> Any:
    """The JSON document in `raw`; where it is an object with an `items` array, every item is passed
    through `each` as it is decoded and the array holds what `each` returned. ValueError if `raw` is not
    one JSON document (json.JSONDecodeError and UnicodeDecodeError are ValueErrors)."""
    text = raw.decode("utf-8")
    start = _skip(text, 0)
    if not text.startswith("{", start):
        value, end = _DECODER.raw_decode(text, start)
        return _finished(text, end, value)
    document: dict[str, Any] = {}
    at = _skip(text, start + 1)
    if text.startswith("}", at):
        return _finished(text, at + 1, document)
    while True:
        key, at = _DECODER.raw_decode(text, at)
        if not isinstance(key, str):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
        at = _expect(text, at, ":")
        if key == "items" and text.startswith("[", at):
            document[key], at = _items(text, at + 1, each)
        else:
            document[key], at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text.startswith("}", at):
            return _finished(text, at + 1, document)
        at = _expect(text, at, ",")


def _items(text: str, at: int, each: Callable[[Any], Any]) -> tuple[list[Any], int]:
    """The array starting after its `[` at `at`, each item through `each`; and the index after its `]`."""
    items: list[Any] = []
    at = _skip(text, at)
    if text.startswith("]", at):
        return items, at + 1
    while True:
        item, at = _DECODER.raw_decode(text, at)
        items.append(each(item))
        del item  # only what `each` kept stays alive while the next item is decoded
        at = _skip(text, at)
        if text.startswith("]", at):
            return items, at + 1
        at = _expect(text, at, ",")


def _expect(text: str, at: int, delimiter: str) -> int:
    """The index of the next value after `delimiter` (and whitespace) at `at`."""
    at = _skip(text, at)
    if not text.startswith(delimiter, at):
        raise json.JSONDecodeError(f"Expecting '{delimiter}' delimiter", text, at)
    return _skip(text, at + 1)


def _finished(text: str, end: int, value: Any) -> Any:
    if _skip(text, end) != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value
