"""The real HTTPS server (gunicorn subprocess, our certificates) on hostile requests.

Every answer is JSON: 200 with a well-formed AdmissionReview response for the request's version, or 400
with one line naming the problem (405 for a wrong method). Never a 5xx, never a hang, never HTML.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies
from tests.fuzz.oracle import assert_one_line, assert_review_answer
from tests.fuzz.runs import SAMPLE, fuzz

JSON = "application/json"

raw_junk = st.sampled_from(
    [
        b"",
        b"null",
        b"[]",
        b"{",
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": ',
        b"[" * 100_000 + b"]" * 100_000,  # nesting far beyond any parser's recursion
        b'{"a":' * 5000 + b"1" + b"}" * 5000,
        b"\xff\xfe\x00{",
        b'{"kind": "AdmissionReview", "x": "\xc3\x28"}',
        b'{"apiVersion": NaN}',
        b'{"request": {"uid": Infinity}}',
        b"\x00" * 64,
        '{"uid": "\ud800"}'.encode("utf-8", "surrogatepass"),
    ]
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


bodies = (
    strategies.admission_reviews.map(_dumps)
    | strategies.hostile_values.map(_dumps)
    | raw_junk
    | strategies.admission_reviews.map(_dumps).flatmap(lambda b: st.integers(0, len(b)).map(lambda n: b[:n]))
)
content_types = st.sampled_from(
    [JSON] * 6 + ["application/json; charset=utf-8", "text/plain", "", "application/yaml"]
)
endpoints = st.sampled_from(["/mutate"] * 5 + ["/validate"] * 5 + ["/healthz", "/nope"])
methods = st.sampled_from(["POST"] * 12 + ["GET", "PUT"])


def check(server, method: str, path: str, content_type: str, body: bytes) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    try:
        response = server.session.request(method, server.url + path, data=body, headers=headers, timeout=30)
    except requests.RequestException as err:
        raise AssertionError(f"no HTTP answer: {err}; server log tail: {server.log()[-2000:]}") from err
    status = response.status_code
    assert status < 500, f"{status} {response.text[:300]}; log tail: {server.log()[-2000:]}"
    assert response.headers["Content-Type"].startswith(JSON), response.headers
    payload = response.json()
    if status == 200:
        if path in ("/mutate", "/validate") and method == "POST":
            assert_review_answer(json.loads(body), payload, patch_allowed=path == "/mutate")
        return
    assert set(payload) == {"error"}, payload
    assert_one_line(payload["error"])
    if method == "POST" and path in ("/mutate", "/validate"):
        assert status == 400, (status, payload)
    else:
        assert status in (404, 405), (status, payload)


@SAMPLE
@given(method=methods, path=endpoints, content_type=content_types, body=bodies)
def test_server_sample(server, method, path, content_type, body):
    check(server, method, path, content_type, body)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(6000)
@given(method=methods, path=endpoints, content_type=content_types, body=bodies)
def test_server_fuzz(server, method, path, content_type, body):
    check(server, method, path, content_type, body)
