"""A client that pipelines faster than it is answered is held to what it has sent: the connection stops
reading once PIPELINED whole requests wait, so the requests read ahead stay bounded however much the
client sends. In process, on plain TCP: the reading and the answering are the connection's own."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from tests.server.inprocess import accept_from
from webhook.server.http1 import PIPELINED, READ_BUFFER, Connection
from webhook.server.limits import Limits
from webhook.server.reader import Request
from webhook.server.wsgi import Answer

WAIT = 60.0
BODY = b"x" * 4000
REQUESTS = 1000
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Owner:
    """Answers every request on the loop, and notes how many were waiting behind each."""

    draining = False
    access_log = False

    def __init__(self) -> None:
        self.connection: Connection | None = None
        self.answered = 0
        self.most_waiting = 0

    def answer_now(self, request: Request) -> Answer | None:
        assert self.connection is not None and request.body == BODY
        self.answered += 1
        self.most_waiting = max(self.most_waiting, len(self.connection.reader.ready))
        return "200 OK", [("Content-Type", "application/json")], b"{}"

    def run_app(self, environ: dict[str, Any]) -> asyncio.Future[Answer]:
        raise AssertionError("every request is answered on the loop")

    def forget(self, connection: Connection) -> None:
        pass

    def closed_by_server(self, reason: str) -> None:
        pass


def client(port: int) -> int:
    """Sends every request in one go, then reads the answers; returns how many came back whole."""
    request = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(request * REQUESTS)
        received = b""
        while len(received) < len(ANSWER) * REQUESTS:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
    return received.count(ANSWER)


def test_requests_read_ahead_of_their_answers_stay_bounded() -> None:
    async def scenario() -> tuple[Owner, int]:
        loop = asyncio.get_running_loop()
        owner = Owner()
        sock, sending = await accept_from(client)
        connection = Connection(owner, Limits(), loop, "http")
        owner.connection = connection
        transport, _ = await loop.connect_accepted_socket(lambda: connection, sock)
        try:
            return owner, await asyncio.wait_for(sending, WAIT)
        finally:
            transport.close()

    owner, answers = asyncio.run(scenario())
    assert answers == owner.answered == REQUESTS
    # What one read can bring on top of the PIPELINED that stop the reading.
    per_read = READ_BUFFER // len(BODY) + 1
    assert owner.most_waiting <= PIPELINED + per_read
