"""webhook.json_codec: orjson where it is installed, the standard library otherwise, writing the same bytes
and reading the same values. The standard library path is tested on every Python; where orjson is installed
it is also compared with orjson on generated values, and the real server is run on both paths (the
PRIORITY_WEBHOOK_JSON switch) to answer the same reviews byte for byte."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.reviews import eviction_review, pod, review
from testkit.server import REPO, webhook_server
from webhook import json_codec
from webhook.json_codec import DecodeError, stdlib_dumps, stdlib_loads

HAS_ORJSON = importlib.util.find_spec("orjson") is not None

# Written as orjson writes them (orjson 3.13): what the standard library alone would write differently.
WRITTEN = [
    (1e-5, b"0.00001"),
    (2.5e-05, b"0.000025"),
    (-1.2345e-05, b"-0.000012345"),
    (1e-6, b"1e-6"),
    (-9.99e-9, b"-9.99e-9"),
    (1e-10, b"1e-10"),
    (1.5e-300, b"1.5e-300"),
    (1e16, b"1e+16"),
    (0.0001, b"0.0001"),
    (-0.0, b"-0.0"),
    (float("nan"), b"null"),
    (float("inf"), b"null"),
    ([float("-inf"), 1.0], b"[null,1.0]"),
    (
        {"k": "é\u2028\x7f", "n": None, "t": (True, False)},
        '{"k":"é\u2028\x7f","n":null,"t":[true,false]}'.encode(),
    ),
    ('\x00\x1f\b\t\n"\\/', b'"\\u0000\\u001f\\b\\t\\n\\"\\\\/"'),
    # Strings that look like what is rewritten stay as they are.
    (["NaN", "1e-05", "-Infinity", 'a"1e-05'], b'["NaN","1e-05","-Infinity","a\\"1e-05"]'),
]

# Read as orjson reads them.
READ = [
    (b'{"a":1,"a":2}', {"a": 2}),
    (b" [1.0e+2, -0] ", [100.0, 0]),
    (b"18446744073709551615", 18446744073709551615),
    (b"18446744073709551616", 1.8446744073709552e19),
    (b"-9223372036854775809", -9.223372036854776e18),
    (b'"\\ud83d\\ude00"', "\U0001f600"),
    (b"[" * 500 + b"]" * 500, functools.reduce(lambda inner, _: [inner], range(499), [])),
]

# Refused by both, with the words callers tell apart where they do.
REFUSED = [
    (b"NaN", None),
    (b"[Infinity]", None),
    (b"1E400", None),
    (b"{not json", None),
    (b"\xef\xbb\xbf{}", None),
    (b'{"a": "\xff"}', "UTF-8"),
    (b'"\\ud800"', None),
    (b"[" * 1025 + b"]" * 1025, "depth limit"),
    (b"[" * 100_000 + b"]" * 100_000, "depth limit"),
]


@pytest.mark.parametrize(("value", "expected"), WRITTEN)
def test_the_standard_library_writes_what_orjson_writes(value: Any, expected: bytes) -> None:
    assert stdlib_dumps(value) == expected
    assert json_codec.dumps(value) == expected


@pytest.mark.parametrize(("data", "expected"), READ)
def test_the_standard_library_reads_what_orjson_reads(data: bytes, expected: Any) -> None:
    for loads in (stdlib_loads, json_codec.loads):
        value = loads(data)
        assert value == expected and type(value) is type(expected)
    assert stdlib_loads(memoryview(bytearray(data))) == expected


@pytest.mark.parametrize(("data", "words"), REFUSED)
def test_the_standard_library_refuses_what_orjson_refuses(data: bytes, words: str | None) -> None:
    for loads in (stdlib_loads, json_codec.loads):
        with pytest.raises(DecodeError, match=words):
            loads(data)


def test_what_neither_writes() -> None:
    for dumps in (stdlib_dumps, json_codec.dumps):
        with pytest.raises(json_codec.EncodeError):
            dumps({"a": object()})
        with pytest.raises(json_codec.EncodeError):
            dumps("\ud800")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.skipif(not HAS_ORJSON, reason="orjson is not installed for this Python (none on 3.15)")
@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_both_engines_agree_on_any_value(value: Any) -> None:
    import orjson

    written = orjson.dumps(value)
    assert stdlib_dumps(value) == written
    read = orjson.loads(written)
    assert stdlib_dumps(stdlib_loads(written)) == orjson.dumps(read)


def engine_in_process(switch: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != json_codec.SWITCH}
    if switch is not None:
        env[json_codec.SWITCH] = switch
    result = subprocess.run(
        [sys.executable, "-c", "from webhook import json_codec; print(json_codec.ENGINE)"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_switch_chooses_the_engine() -> None:
    assert engine_in_process(None) == ("orjson" if HAS_ORJSON else "json")
    assert engine_in_process("orjson") == ("orjson" if HAS_ORJSON else "json")
    assert engine_in_process("json") == "json"


REVIEWS: list[tuple[str, bytes]] = [
    ("/mutate", json_codec.dumps(review(pod(class_name="high")))),
    ("/mutate", json_codec.dumps(review(pod(class_name="no-such-class")))),
    ("/mutate", json_codec.dumps(review(pod(class_name=None, priority=5)))),
    ("/validate", json_codec.dumps(review(pod(class_name="high", priority=1)))),
    ("/validate", json_codec.dumps(eviction_review("node-1"))),
    ("/mutate", json_codec.dumps(review(pod(class_name="hïgh ✓ \u2028")))),
    ("/mutate", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'),
    ("/mutate", b"{not json"),
    ("/mutate", b'{"a": "\xff"}'),
    ("/mutate", b"NaN"),
    ("/mutate", b"[" * 2000 + b"]" * 2000),
]


@pytest.mark.slow
def test_the_server_answers_alike_on_both_engines(tmp_path: Path) -> None:
    """Where orjson is not installed both servers use the standard library (test_the_switch_chooses_the_engine
    shows that); the engines are then compared by the tests above."""
    answers: dict[str, list[tuple[int, bytes]]] = {}
    for switch in ("orjson", "json"):
        folder = tmp_path / switch
        folder.mkdir()
        answers[switch] = []
        with webhook_server(folder, env={json_codec.SWITCH: switch}) as server:
            for path, body in REVIEWS:
                answer = server.session.post(
                    server.url + path, data=body, headers={"Content-Type": "application/json"}, timeout=30
                )
                answers[switch].append((answer.status_code, answer.content))
    statuses = [status for status, _ in answers["json"]]
    assert statuses.count(200) >= 5 and statuses.count(400) >= 4, answers["json"]
    assert answers["orjson"] == answers["json"]
