"""A connection of the serving loop in this process: one accepted socket, its client in a thread."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def accept_from(client: Callable[[int], T]) -> tuple[socket.socket, asyncio.Future[T]]:
    """Listen on a free loopback port, run `client(port)` in a thread, and accept its one connection;
    the socket (non-blocking, for the loop) and the client's result to come."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    with listener:
        result = asyncio.ensure_future(asyncio.to_thread(client, listener.getsockname()[1]))
        sock, _ = await loop.sock_accept(listener)
    return sock, result
