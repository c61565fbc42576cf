"""Reading a big cluster dump (`kubectl get nodes,pods,pdb,pc -A -o json`) as a stream of objects.

A dump of 150,000 pods is over 100 MiB of JSON. Parsing it whole, with any parser, costs more memory than
the planner needs by an order of magnitude, and the standard library's parser is slow. So a `v1 List` in
JSON is cut into chunks of whole items, each parsed with orjson (webhook.json_codec: where orjson is not
installed, the standard library, reading the same) and handed out one object at a time: the caller keeps a
compact record and the object is freed; at most one chunk of objects is alive at once.

Cutting is sound without a tokenizer: the head (`{"apiVersion": ..., "items": `) and the tail are parsed
with a placeholder for the items, which proves where the top-level items begin; a chunk starts where the
previous one ended, so it starts between two items, and it ends where it parses as complete values.
A guessed cut in the middle of an item makes the chunk unparsable and the chunk is extended to the next.

Duplicate keys, which orjson silently resolves to the last value, are refused as the strict reader does:
every `"` of the input is a string delimiter or an escaped quote, and orjson writes each string back with
the same quotes, so a chunk whose re-serialization has fewer `"` than its text lost a key.

Anything else (YAML, a single object, an error of any kind) goes through the strict reader of
`webhook.files.documents`, which names the file, the document and the problem exactly as every command does.
One difference remains: an integer beyond 64 bits (no API server writes one; every integer field of the
API is an int64) is read as a float by orjson, as an integer by the strict reader.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from webhook import json_codec
from webhook.files.documents import InputError, file_error, parse_documents

CHUNK_BYTES = 64 << 10  # parsed objects stay in the CPU cache until read and freed: 1.5x faster than 4 MiB
Progress = Callable[[int, int], None]  # (bytes read, bytes in all) of one file; total 0 when unknown

# The start of the `items` list of the top-level object (verified by parsing the head, see above).
_ITEMS = re.compile(rb'"items"\s*:\s*\[')
# A likely cut between two items: `}, {"apiVersion":`, `{"kind":` or `{"metadata":` (kubectl sorts keys, the
# API server writes metadata first in list items). Nested lists rarely look like that, and a wrong guess
# only costs one more parse of the chunk, extended to the next likely cut.
_CUT = re.compile(rb'\}\s*,\s*(?=\{\s*"(?:apiVersion|kind|metadata)"\s*:)')
MAX_TRIES = 8  # parses of one chunk, each extended to the next cut, before the strict reader decides
_OBJECT = re.compile(rb"\s*\{")
_PLACEHOLDER = b'"\\u0000items"'
_ESCAPED_QUOTE = b"\\u0022"  # a quote written as an escape: the quote count below would not see it


class _Strict(Exception):
    """The fast path cannot tell: the strict reader decides."""


def read_bytes(path: str) -> bytearray:
    """The file's bytes, writable (chunks are framed in place), in one buffer of the file's size."""
    if path == "-":
        return bytearray(sys.stdin.buffer.read())
    try:
        with open(path, "rb") as f:
            data = bytearray(os.fstat(f.fileno()).st_size)
            read = f.readinto(data)
            if read < len(data):  # the file shrank meanwhile
                del data[read:]
            while more := f.read(1 << 20):  # or grew (or is not a regular file)
                data += more
            return data
    except OSError as err:
        raise file_error(path, err) from None


def stream_objects(
    path: str, progress: Progress | None = None, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[str, Any]]:
    """(source, object) for every object of the file, in order; the source names file and document as
    `webhook.files.documents.load_objects` does. The file is read whole as bytes, its objects one chunk at
    a time."""
    source = "<stdin>" if path == "-" else path
    data = read_bytes(path)
    size = len(data)
    yielded = 0
    try:
        for obj in _fast(data, progress, chunk_bytes):
            yielded += 1
            yield f"{source}: document {yielded}", obj
        return
    except _Strict:
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{source}: not UTF-8 text") from None
    del data
    docs = parse_documents(text, source)
    del text
    # The objects handed out already were read correctly (a chunk is only used once it checks out).
    for i in range(yielded, len(docs)):
        yield f"{source}: document {i + 1}", docs[i]
        docs[i] = None
    if progress:
        progress(size, size)


def _fast(data: bytearray, progress: Progress | None, chunk_bytes: int) -> Iterator[Any]:
    """The objects of a JSON `v1 List`, chunk by chunk; _Strict when the input is anything else."""
    size = len(data)
    start = _items_start(data)
    end = data.rindex(b"]")  # the tail is verified with the head
    if end < start:
        raise _Strict
    _check_head_and_tail(data, start, end)
    buffer = data
    view = memoryview(buffer)
    try:
        a = start + 1  # first byte of the chunk; buffer[a - 1] is `[` or the `,` before it
        while a < end:
            b = _next_cut(data, a + chunk_bytes, end)
            items = _parse_chunk(buffer, view, a, b)
            tries = 1
            while items is None and b < end and tries < MAX_TRIES:  # a cut inside an item: extend
                b = _next_cut(data, b + 1, end)
                items = _parse_chunk(buffer, view, a, b)
                tries += 1
            if items is None:
                raise _Strict
            a = b + 1
            if progress:
                progress(a, size)
            for i in range(len(items)):
                obj, items[i] = items[i], None
                yield obj
    finally:
        view.release()


def _items_start(data: bytearray) -> int:
    """Index of the `[` of the top-level `items` (checked by `_check_head_and_tail`)."""
    if _OBJECT.match(data) is None or _ESCAPED_QUOTE in data:
        raise _Strict
    found = _ITEMS.search(data)
    if found is None:
        raise _Strict
    return found.end() - 1


def _check_head_and_tail(data: bytearray, start: int, end: int) -> None:
    """`start`..`end` is the `items` list of the top-level object, a List without duplicate keys."""
    outer = bytes(data[:start]) + _PLACEHOLDER + bytes(data[end + 1 :])
    try:
        doc = json_codec.loads(outer)
        rewritten = json_codec.dumps(doc)
    except (json_codec.DecodeError, json_codec.EncodeError):
        raise _Strict from None
    if not isinstance(doc, dict) or doc.get("items") != "\x00items":
        raise _Strict
    kind = doc.get("kind")
    if not (isinstance(kind, str) and kind.endswith("List")) or outer.count(b'"') != rewritten.count(b'"'):
        raise _Strict


def _next_cut(data: bytearray, at: int, end: int) -> int:
    """Index of the `,` of the next likely cut at or after `at`, or `end`."""
    if at >= end:
        return end
    found = _CUT.search(data, at, end)
    if found is None:
        return end
    return data.index(b",", found.start(), found.end())


def _parse_chunk(buffer: bytearray, view: memoryview, a: int, b: int) -> list[Any] | None:
    """The items of buffer[a:b], framed in place as `[ ... ]`; None if it is not complete values or a
    key was duplicated."""
    before, after = buffer[a - 1], buffer[b]
    buffer[a - 1], buffer[b] = ord("["), ord("]")
    try:
        items: list[Any] = json_codec.loads(view[a - 1 : b + 1])  # a JSON array: framed as one above
    except json_codec.DecodeError:
        return None
    finally:
        buffer[a - 1], buffer[b] = before, after
    try:
        quotes = json_codec.dumps(items).count(b'"')
    except json_codec.EncodeError:  # nested deeper than orjson writes: the strict reader says so
        return None
    if buffer.count(b'"', a, b) != quotes:
        return None
    return items
