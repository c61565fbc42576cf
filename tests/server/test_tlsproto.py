"""The TLS protocol of the serving loop: no read buffer of its own, and nothing left by a closed connection.

webhook.server.tlsproto relies on how asyncio's SSLProtocol sizes and uses its read buffer (`max_size`,
`_ssl_buffer`, `_ssl_buffer_view`) and on the socket transport's `_read_ready_cb`: a Python upgrade that
changes them fails here, not as memory growth in production. `scripts/test` runs this on 3.11 and 3.13.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import tracemalloc
from asyncio import selector_events, sslproto
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.files import tls
from webhook.server import worker
from webhook.server.tlscontext import server_context
from webhook.server.tlsproto import READ_SIZE, SharedBufferSSLProtocol, accept_tls


def test_protocols_share_one_read_buffer_and_allocate_none(certs: Path) -> None:
    context = server_context(certs / tls.TLS_CERT, certs / tls.TLS_KEY)
    loop = asyncio.new_event_loop()

    def held_by(kind: type[sslproto.SSLProtocol]) -> tuple[list[sslproto.SSLProtocol], int]:
        """100 protocols of `kind`, and the memory they hold."""
        tracemalloc.start()
        try:
            made = [
                kind(loop, asyncio.Protocol(), context, loop.create_future(), server_side=True)
                for _ in range(100)
            ]
            return made, tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    try:
        stock, stock_bytes = held_by(sslproto.SSLProtocol)
        ours, our_bytes = held_by(SharedBufferSSLProtocol)
    finally:
        loop.close()
    assert stock_bytes >= 100 * READ_SIZE  # asyncio's own: a READ_SIZE (256 KiB) buffer each
    assert our_bytes < stock_bytes / 20, (our_bytes, stock_bytes)
    assert len({id(p.get_buffer(-1).obj) for p in ours}) == 1
    assert len(ours[0].get_buffer(-1)) == READ_SIZE
    shared = ours[0]
    assert isinstance(shared, SharedBufferSSLProtocol)
    assert shared._ssl_buffer_view.obj is shared.get_buffer(-1).obj  # what buffer_updated() copies from
    assert len({id(p.get_buffer(-1).obj) for p in stock}) == 100


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_SERVER_PORTS: set[int] = set()  # the listeners' ports: a transport bound to one is the server's


def _alive() -> dict[str, int]:
    """The server side's objects alive (the client's are asyncio's own, with their own cycles): our
    protocols and the socket transports under them."""
    counts: dict[str, int] = {}
    for o in gc.get_objects():
        if isinstance(o, SharedBufferSSLProtocol | Echo):
            counts[type(o).__name__] = counts.get(type(o).__name__, 0) + 1
        elif isinstance(o, selector_events._SelectorSocketTransport):
            sockname = o.get_extra_info("sockname")
            if sockname and sockname[1] in _SERVER_PORTS:
                counts["server transport"] = counts.get("server transport", 0) + 1
    return counts


class Echo(asyncio.Protocol):
    """Closes the connection on its first data."""

    lost: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.BaseTransport | None = transport

    def data_received(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.transport = None
        if self.lost is not None and not self.lost.done():
            self.lost.set_result(None)


@pytest.mark.usefixtures("collector_off")
def test_closed_connections_are_freed_without_the_cyclic_collector(certs: Path) -> None:
    """Handshakes abandoned by the client, timed out, completed and then reset, completed and then closed
    by the server: afterwards no protocol or transport of theirs is alive, with gc off."""
    context = server_context(certs / tls.TLS_CERT, certs / tls.TLS_KEY)
    client_context = ssl.create_default_context(cafile=str(certs / tls.CA_CERT))

    async def one(kind: str) -> None:
        echo = Echo()
        echo.lost = asyncio.get_running_loop().create_future()
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        port = listener.getsockname()[1]
        _SERVER_PORTS.add(port)
        loop = asyncio.get_running_loop()
        client = asyncio.ensure_future(client_side(kind, port))
        sock, _ = await loop.sock_accept(listener)
        listener.close()
        try:
            await accept_tls(loop, sock, echo, context, 0.5, 1.0)
            await asyncio.wait_for(echo.lost, 10)
        except (OSError, ssl.SSLError):
            pass  # the handshake failed: what the server sees of an abandoned one
        await asyncio.gather(client, return_exceptions=True)
        echo.lost = None
        for _ in range(5):
            await asyncio.sleep(0)  # let the transports' close callbacks run

    async def client_side(kind: str, port: int) -> None:
        if kind in ("abandoned", "silent"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if kind == "silent":
                await reader.read()  # until the server's handshake deadline drops it
            writer.transport.abort()
            return
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context, server_hostname="localhost"
        )
        if kind == "reset":
            writer.transport.abort()
            return
        writer.write(b"x")  # the server closes on data
        await reader.read()
        writer.transport.abort()

    asyncio.run(one("closed"))  # warm-up: imports and first-use caches
    baseline = _alive()
    for kind in ("abandoned", "silent", "reset", "closed") * 5:
        asyncio.run(one(kind))
    assert _alive() == baseline, baseline


def test_malloc_trim_is_found_under_glibc() -> None:
    trim = worker._malloc_trim()
    libc, _ = __import__("platform").libc_ver()
    if libc != "glibc":
        assert trim is None
    else:
        assert trim is not None and trim() in (0, 1)
