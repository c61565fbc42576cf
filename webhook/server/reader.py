"""Bytes in, whole requests out: one connection's HTTP/1.1 request parsing, under the server's limits.

llhttp (through httptools, compiled) does the parsing; this part keeps what the server needs of it: each
request whole (line, headers, body), in order, and the first error as a refusal with its one-line message.
A client may pipeline: what it sends is parsed as it arrives and whole requests wait here for their turn;
the connection (webhook.server.http1) stops reading while too many wait.

Parsing was h11's before, at about 40 µs of CPU per review; llhttp takes about 2. What h11 refused and
llhttp lets through is refused here: an HTTP/1.1 request without Host, a request line and headers over
the limit (llhttp has no limit of its own).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import httptools

from webhook.server.limits import Limits

log = logging.getLogger(__name__)

# The line's own framing ("POST  HTTP/1.1\r\n") and each header's (": " and "\r\n"), counted in the head.
_LINE_FRAMING = 16
_HEADER_FRAMING = 4


@dataclass(slots=True)
class Request:
    """A request read whole. Header names are lower-cased; values are as sent."""

    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]
    http_version: str  # "1.1" or "1.0"
    keep_alive: bool  # the client allows another request on this connection
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)


@dataclass(slots=True)
class Refusal:
    """An error no request may follow: answered with `status` and a one-line message, then the close."""

    status: int
    message: str


class _Refused(Exception):
    """Raised inside a parser callback to stop the parser; its refusal is taken from the reader."""


class RequestReader:
    """Feeds a connection's bytes to llhttp and collects its requests, or the refusal that ends them."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.parser = httptools.HttpRequestParser(self)
        self.ready: deque[Request | Refusal] = deque()
        self.in_message = False  # a request has begun and is not complete yet
        self.in_head = False  # ... and its headers are not complete yet
        self.awaiting_continue = False  # its client sent "Expect: 100-continue" and waits to send the body
        self.ended = False  # a refusal or a protocol switch: nothing after it is read
        self._refusal: Refusal | None = None
        self._began_in_this_feed = False
        self._reset()

    def _reset(self) -> None:
        self._target: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_bytes = 0  # the request line and the headers complete so far
        self._head_carried = 0  # whole reads of a head still not complete: never more than the head
        self._size = 0

    def feed(self, data: bytes) -> None:
        """Parse what arrived; whole requests (and a refusal, last) are appended to `ready`."""
        if self.ended:
            return
        self._began_in_this_feed = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # A request offering another protocol (over TLS only ALPN can switch, and we offer HTTP/1.1) is
            # answered as a plain one if it has no body, and the connection closes after the answer: what
            # follows it would be the other protocol. llhttp leaves the body of such a request unread, so
            # one with a body is refused rather than answered without it.
            self.ended = True
            last = self.ready[-1] if self.ready else None
            if isinstance(last, Request):
                last.keep_alive = False
                chunked = last.header(b"transfer-encoding") is not None
                if chunked or last.header(b"content-length") not in (None, b"0"):
                    self.ready[-1] = Refusal(400, "request: a protocol switch (Upgrade) with a body")
            return
        except httptools.HttpParserCallbackError as err:
            if self._refusal is None:
                log.error("request parsing failed", exc_info=err.__context__)
            self._end(self._refusal or Refusal(500, "internal error"))
            return
        except httptools.HttpParserError as err:
            in_body = self.in_message and not self.in_head
            where = "body: malformed" if in_body else "request: malformed request line or headers"
            self._end(Refusal(400, f"{where}: {err}"))
            return
        if self.in_head and not self._began_in_this_feed:
            # All of this read belongs to a head that began earlier and is still not complete: llhttp holds
            # the header it is in, which no callback has counted yet.
            self._head_carried += len(data)
            if self._head_carried > self.limits.max_header_bytes:
                self._end(self._head_refusal())

    def close(self) -> None:
        """Drop the parser, which holds this reader's callbacks: the connection's state is freed by reference
        counting at its close, not by the cyclic collector."""
        self.ended = True
        del self.parser

    def end_of_input(self) -> None:
        """The client sent its last byte: a request it began and did not finish is refused."""
        if self.in_message and not self.ended:
            self._end(Refusal(400, "request: the connection was closed before the request was complete"))

    def _end(self, refusal: Refusal) -> None:
        self.ended = True
        self.in_message = self.in_head = self.awaiting_continue = False
        self.ready.append(refusal)

    def _refuse(self, refusal: Refusal) -> None:
        self._refusal = refusal
        raise _Refused(refusal.message)

    def _head_refusal(self) -> Refusal:
        limit = self.limits.max_header_bytes
        return Refusal(431, f"headers: the request line and headers are over the {limit}-byte limit")

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.limits.max_header_bytes:
            self._refuse(self._head_refusal())

    # -- llhttp's callbacks ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._reset()
        self.in_message = self.in_head = True
        self._began_in_this_feed = True
        self._head_bytes = _LINE_FRAMING

    def on_url(self, url: bytes) -> None:
        self._target.append(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))
        self._count_head(len(name) + len(value) + _HEADER_FRAMING)

    def on_headers_complete(self) -> None:
        self.in_head = False
        version = self.parser.get_http_version()
        if version not in ("1.0", "1.1"):  # llhttp takes "HTTP/2.0" in a request line, and 0.9
            self._refuse(
                Refusal(505, f"request: HTTP/{version} is not supported: this server speaks HTTP/1.1")
            )
        if version == "1.1" and not any(name == b"host" for name, _ in self._headers):
            self._refuse(Refusal(400, "request: malformed request line or headers: no Host header"))
        for name, value in self._headers:
            if name == b"content-length" and int(value) > self.limits.max_body_bytes:  # llhttp checked digits
                limit = self.limits.max_body_bytes
                self._refuse(Refusal(400, f"body: {int(value)} bytes is over the {limit}-byte limit"))
            if name == b"expect" and value.lower() == b"100-continue" and version == "1.1":
                self.awaiting_continue = True

    def on_body(self, body: bytes) -> None:
        self.awaiting_continue = False
        self._size += len(body)
        if self._size > self.limits.max_body_bytes:
            self._refuse(Refusal(400, f"body: over the {self.limits.max_body_bytes}-byte limit"))
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.ready.append(
            Request(
                method=self.parser.get_method(),
                target=b"".join(self._target),
                headers=self._headers,
                http_version=self.parser.get_http_version(),
                keep_alive=self.parser.should_keep_alive(),
                body=b"".join(self._body),
            )
        )
        self.in_message = self.in_head = self.awaiting_continue = False
        self._reset()
