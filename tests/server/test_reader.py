"""The request reader on its own: bytes in, whole requests or one refusal out, however the bytes are split.

The wire-level behaviour (the answers, the close, the deadline) is in test_serving.py; here each rule of
the reader is one row: what llhttp refuses, what the reader refuses on top of it (no Host, the limits),
and what it keeps of each request."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.server.limits import Limits
from webhook.server.reader import Refusal, Request, RequestReader

LIMITS = Limits(max_header_bytes=1024, max_body_bytes=4096)


def post(body: bytes, *headers: bytes, target: bytes = b"/mutate", version: bytes = b"1.1") -> bytes:
    head = b"POST %s HTTP/%s\r\nHost: localhost\r\nContent-Length: %d\r\n" % (target, version, len(body))
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def read(*pieces: bytes, limits: Limits = LIMITS) -> list[Request | Refusal]:
    reader = RequestReader(limits)
    for piece in pieces:
        reader.feed(piece)
    return list(reader.ready)


def test_a_request_is_kept_whole_with_lower_cased_header_names() -> None:
    [request] = read(post(b'{"a": 1}', b"Content-Type: application/json", target=b"/mutate?timeout=10s"))
    assert isinstance(request, Request)
    assert request.method == b"POST" and request.target == b"/mutate?timeout=10s"
    assert request.http_version == "1.1" and request.keep_alive
    assert request.body == b'{"a": 1}'
    assert request.header(b"content-type") == b"application/json"
    assert request.header(b"host") == b"localhost" and request.header(b"x-missing") is None


def test_chunked_bodies_are_joined() -> None:
    wire = (
        b"POST /mutate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    [request] = read(wire)
    assert isinstance(request, Request) and request.body == b"abcde"


@pytest.mark.parametrize(
    ("wire", "keep_alive"),
    [
        (post(b"{}"), True),
        (post(b"{}", b"Connection: close"), False),
        (post(b"{}", version=b"1.0"), False),
        (post(b"{}", b"Connection: keep-alive", version=b"1.0"), True),
        # A protocol switch offered: answered as a plain request, and nothing after it is read.
        (b"GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", False),
    ],
    ids=["1.1", "1.1 close", "1.0", "1.0 keep-alive", "upgrade offered"],
)
def test_whether_the_client_allows_another_request(wire: bytes, keep_alive: bool) -> None:
    [request] = read(wire)
    assert isinstance(request, Request) and request.keep_alive is keep_alive


def test_an_upgrade_offer_with_a_body_is_refused() -> None:
    for framing in (
        b"Content-Length: 2\r\n\r\n{}",
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    ):
        [refusal] = read(b"POST /m HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n" + framing)
        assert isinstance(refusal, Refusal) and refusal.status == 400 and "Upgrade" in refusal.message


def test_nothing_after_an_upgrade_offer_is_read() -> None:
    wire = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
    reader = RequestReader(LIMITS)
    reader.feed(wire + post(b"{}"))
    reader.feed(post(b"{}"))
    assert len(reader.ready) == 1 and reader.ended


@pytest.mark.parametrize(
    ("pieces", "status", "message"),
    [
        ((b"NOT AN HTTP REQUEST\r\n\r\n",), 400, "request: malformed request line or headers: "),
        ((b"POST /m HTTP/1.1\r\n\r\n",), 400, "request: malformed request line or headers: no Host header"),
        ((b"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",), 400, "request: malformed request"),
        (
            (b"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",),
            400,
            "request: malformed request line or headers: ",
        ),
        (  # request smuggling's shape: both framings
            (b"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",),
            400,
            "request: malformed request line or headers: ",
        ),
        ((b"POST /m HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",), 400, "request: malformed request line"),
        (
            (b"POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",),
            400,
            "body: malformed: ",
        ),
        (
            (b"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 4097\r\n\r\n",),
            400,
            "body: 4097 bytes is over the 4096-byte limit",
        ),
        (
            (b"POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", b"1001\r\n" + b"x" * 4097),
            400,
            "body: over the 4096-byte limit",
        ),
        (
            (b"POST /m HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n",),
            431,
            "headers: the request line and headers are over the 1024-byte limit",
        ),
        (  # the same header dripped: no callback sees it whole, the reads are counted
            (b"POST /m HTTP/1.1\r\nHost: h\r\nX-Big: ", *[b"a" * 100] * 20),
            431,
            "headers: the request line and headers are over the 1024-byte limit",
        ),
        ((b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",), 400, "request: malformed request line or headers: "),
        ((b"POST /m HTTP/2.0\r\nHost: h\r\n\r\n",), 505, "request: HTTP/2.0 is not supported"),
        ((b"POST /m HTTP/3.1\r\nHost: h\r\n\r\n",), 400, "request: malformed request line or headers: "),
        (
            (b"POST /" + b"u" * 2000 + b" HTTP/1.1\r\n",),
            431,
            "headers: the request line and headers are over the 1024-byte limit",
        ),
    ],
    ids=[
        "not HTTP",
        "no Host",
        "Content-Length not a number",
        "two Content-Lengths",
        "Content-Length and chunked",
        "obsolete line folding",
        "bad chunk size",
        "declared body over the limit",
        "chunked body over the limit",
        "one header over the limit",
        "a header dripped over the limit",
        "HTTP/2 prior knowledge",
        "HTTP/2.0 request line",
        "HTTP/3.1",
        "request line over the limit",
    ],
)
def test_refusals(pieces: tuple[bytes, ...], status: int, message: str) -> None:
    *requests, refusal = read(*pieces)
    assert requests == []
    assert isinstance(refusal, Refusal) and refusal.status == status
    assert refusal.message.startswith(message) and "\n" not in refusal.message


def test_a_refusal_ends_the_connection_after_the_requests_before_it() -> None:
    reader = RequestReader(LIMITS)
    reader.feed(post(b"{}") + b"GARBAGE\r\n\r\n" + post(b"{}"))
    reader.feed(post(b"{}"))
    first, refusal = reader.ready
    assert isinstance(first, Request) and isinstance(refusal, Refusal) and reader.ended


def test_a_head_just_under_the_limit_split_across_reads_is_not_refused() -> None:
    wire = post(b"{}", b"X-Fill: " + b"f" * (LIMITS.max_header_bytes - 120))
    for cut in range(1, len(wire)):
        [request] = read(wire[:cut], wire[cut:])
        assert isinstance(request, Request), cut


def test_expect_100_continue_is_reported_until_the_body_starts() -> None:
    reader = RequestReader(LIMITS)
    reader.feed(b"POST /m HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    assert reader.awaiting_continue and reader.in_message and not reader.ready
    reader.feed(b"{")
    assert not reader.awaiting_continue
    reader.feed(b"}")
    assert not reader.in_message and len(reader.ready) == 1


def test_end_of_input_inside_a_request_is_refused_and_between_requests_is_not() -> None:
    reader = RequestReader(LIMITS)
    reader.feed(post(b"{}"))
    reader.end_of_input()
    assert len(reader.ready) == 1
    reader.feed(post(b"{}")[:10])
    reader.end_of_input()
    refusal = reader.ready[-1]
    assert isinstance(refusal, Refusal) and refusal.status == 400


WIRE = (
    post(b'{"first": true}', b"Content-Type: application/json")
    + b"POST /validate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"
    + b"GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"
    + post(b"x" * 300, version=b"1.0")
)


@given(st.lists(st.integers(min_value=0, max_value=len(WIRE)), max_size=12))
def test_pipelined_requests_come_out_the_same_however_the_bytes_are_split(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(WIRE)]
    pieces = [WIRE[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    got = read(*pieces)
    assert [(r.method, r.target, r.body, r.keep_alive) for r in got if isinstance(r, Request)] == [
        (b"POST", b"/mutate", b'{"first": true}', True),
        (b"POST", b"/validate", b"abcd", True),
        (b"GET", b"/healthz", b"", True),
        (b"POST", b"/mutate", b"x" * 300, False),
    ]
