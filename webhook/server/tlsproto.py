"""asyncio's TLS protocol without a read buffer of its own per connection, and the handshake that uses it.

Why: `asyncio.sslproto.SSLProtocol` gives every connection a 256 KiB bytearray at construction (before its
handshake, so a silent TCP connection has one too) to read ciphertext into, and copies each read into the
connection's MemoryBIO at once. Under connection churn those buffers were most of the worker's memory:
each was freed only with its connection, a few hundred of them at a time waited for the cyclic garbage
collector (docs/performance.md, "Memory under connection churn"), and glibc served them from its heap
(past its first free, the dynamic mmap threshold rises above 256 KiB), so the freed space stayed in the
process. Every connection of a worker is read by the worker's one event loop thread, one read at a time,
and the bytes are copied out before the read returns: one buffer per process does the same work.

Everything else is asyncio's own protocol (the handshake, its timeout, close_notify, flow control).
tests/server/test_tlsproto.py checks that the attributes this relies on are still the standard library's, on
every Python `scripts/test` runs (3.11 and 3.13: the same in both).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto
from typing import Any

# asyncio's own read size: a read takes whatever the kernel has, up to this.
READ_SIZE = sslproto.SSLProtocol.max_size
_BUFFER = bytearray(READ_SIZE)
_VIEW = memoryview(_BUFFER)


class SharedBufferSSLProtocol(sslproto.SSLProtocol):
    """SSLProtocol reading into this process's one buffer (the event loop's thread is its only user)."""

    # Read by SSLProtocol.__init__ to size the buffer it allocates: none.
    max_size = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ssl_buffer = _BUFFER  # what buffer_updated() copies from
        self._ssl_buffer_view = _VIEW

    def get_buffer(self, n: int) -> memoryview:
        return _VIEW

    def connection_lost(self, exc: BaseException | None) -> None:
        transport = self._transport
        try:
            super().connection_lost(exc)
        finally:
            # asyncio's socket transport keeps its read callback, a bound method of itself, after it has
            # closed: a reference cycle that would keep the transport and its socket object until a full
            # collection. Python 3.13's close() drops it, but not an abort (a reset, a failed handshake,
            # a handshake timeout), and 3.11 never does. It reads nothing any more.
            if transport is not None and hasattr(transport, "_read_ready_cb"):
                transport._read_ready_cb = None


async def accept_tls(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    protocol: asyncio.BaseProtocol,
    context: ssl.SSLContext,
    handshake_timeout: float,
    shutdown_timeout: float,
) -> None:
    """`loop.connect_accepted_socket(..., ssl=context)` with the shared-buffer protocol: returns once the
    handshake is done (`protocol.connection_made` has run), raises what ended it otherwise.

    A failed handshake's exception must not find the waiter future in this frame: its traceback holds the
    frame, the waiter holds the exception, and that cycle (with the protocols and every buffer of the
    connection) would wait for the cyclic garbage collector. asyncio's own connect_accepted_socket(ssl=...)
    has that cycle.
    """
    waiter = loop.create_future()
    tls = SharedBufferSSLProtocol(
        loop,
        protocol,
        context,
        waiter,
        server_side=True,
        ssl_handshake_timeout=handshake_timeout,
        ssl_shutdown_timeout=shutdown_timeout,
    )

    # A default argument, not a closure: the `del` below must leave nothing of the protocol in this frame.
    def factory(made: SharedBufferSSLProtocol = tls) -> SharedBufferSSLProtocol:
        return made

    transport, _ = await loop.connect_accepted_socket(factory, sock)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    finally:
        del waiter, tls, factory
