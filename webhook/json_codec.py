"""JSON to bytes and back, for every module of the webhook: orjson where it is installed, else the
standard library's `json`, chosen once, here, at import.

orjson reads a review at a third of the standard library's cost (docs/performance.md), but it has no wheel
for every Python we admit (none for 3.15 yet) and its source build needs a Rust toolchain, so setup.cfg
installs it only where it has wheels. Without it the standard library does the work, made to write the
same bytes and read the same values as orjson: floats as orjson spells them (`0.00001`, `1e-6`), NaN and
the infinities as `null`; on reading, only UTF-8 without a byte-order mark, no NaN or Infinity, no number
beyond a double, no lone surrogate escape, at most 1024 levels of nesting, and an integer beyond 64 bits as
a float. Left different, since no Kubernetes object nests that deep and nothing the webhook writes has one:
the standard library reads no deeper than the interpreter's recursion limit allows (about 1000 levels on
3.11), and it writes a dict key that is not a str, an integer beyond 64 bits and nesting deeper than
orjson's 254 levels, which orjson refuses.

PRIORITY_WEBHOOK_JSON=json makes a process use the standard library even where orjson is installed (the
tests run both paths that way; docs/performance.md compares them); unset, or `orjson`, takes orjson where
it can be imported.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

SWITCH = "PRIORITY_WEBHOOK_JSON"
MAX_DEPTH = 1024  # orjson's limit for reading

# Both engines raise this (orjson's JSONDecodeError is a subclass), with orjson's words for the failures
# a caller tells apart: "not valid UTF-8", "depth limit exceeded".
DecodeError = json.JSONDecodeError
# And this for a value they cannot write (orjson's JSONEncodeError is TypeError itself).
EncodeError = TypeError


def _engine() -> str:
    wanted = os.environ.get(SWITCH, "")
    if wanted not in ("", "orjson", "json"):
        raise ValueError(f"{SWITCH}: must be orjson or json, got {wanted!r}")
    if wanted == "json":
        return "json"
    try:
        import orjson  # noqa: F401
    except ImportError:
        return "json"
    return "orjson"


ENGINE = _engine()


# --- the standard library, made to match orjson (stdlib_loads, stdlib_dumps: also for the tests) ------------


def _int(text: str) -> int | float:
    value = int(text)
    return value if -(1 << 63) <= value < (1 << 64) else float(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number is infinity when parsed as double")
    return value


def _constant(text: str) -> Any:
    raise ValueError(f"unexpected character, expected a JSON value: {text}")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)
_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def stdlib_loads(data: bytes | bytearray | memoryview | str) -> Any:
    if isinstance(data, str):
        text = data
    else:
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError as err:
            raise DecodeError("str is not valid UTF-8", "", err.start) from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise DecodeError("depth limit exceeded", text, 0) from None
    except DecodeError:
        raise
    except ValueError as err:  # from the hooks above (and int()'s limit on digits)
        raise DecodeError(str(err), text, 0) from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise DecodeError("depth limit exceeded", text, 0)
    if _LONE_SURROGATE.search(text) and _has_surrogate(value):
        raise DecodeError("str is not valid UTF-8: lone surrogate", text, 0)
    return value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True)
# A string (left as it is), a float the standard library writes differently from orjson (an exponent of -5
# to -9 written `e-05`), or a non-finite float.
_RESPELL = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|(-?\d(?:\.\d+)?)e-0(\d)|-?Infinity|NaN', re.DOTALL)
_DIGITS = b"0123456789"


def _may_need_respelling(data: bytes) -> bool:
    """A quick look (byte searches, no regex) for what _RESPELL rewrites, in a string too."""
    if b"NaN" in data or b"Infinity" in data:
        return True
    at = data.find(b"e-0")
    while at > 0:
        if data[at - 1] in _DIGITS:
            return True
        at = data.find(b"e-0", at + 3)
    return False


def _respell(found: re.Match[bytes]) -> bytes:
    token, mantissa, exponent = found.group(0), found.group(1), found.group(2)
    if mantissa is None:
        return token if token.startswith(b'"') else b"null"
    if exponent != b"5":
        return mantissa + b"e-" + exponent
    sign = b"-" if mantissa.startswith(b"-") else b""
    return sign + b"0.0000" + mantissa.lstrip(b"-").replace(b".", b"")


def stdlib_dumps(value: Any) -> bytes:
    try:
        data = _ENCODER.encode(value).encode("utf-8")
    except (ValueError, RecursionError) as err:  # UnicodeEncodeError (a lone surrogate) is a ValueError
        raise EncodeError(str(err)) from None
    if _may_need_respelling(data):
        data = _RESPELL.sub(_respell, data)
    return data


# --- the choice -------------------------------------------------------------------------------------------

loads: Callable[[bytes | bytearray | memoryview | str], Any]
dumps: Callable[[Any], bytes]

if ENGINE == "orjson":
    import orjson

    loads, dumps = orjson.loads, orjson.dumps
else:
    loads, dumps = stdlib_loads, stdlib_dumps
