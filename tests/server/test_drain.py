"""A worker told to stop closes its idle kept-alive connections at once: our TLS close_notify is sent, the
client's is not waited for (a kept-alive client answers it only when it next reads, and `serve` took the
TLS shutdown timeout, 2 s, to exit while one was connected)."""

from __future__ import annotations

import asyncio
import http.client
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

from tests.server.inprocess import accept_from
from webhook.files import tls
from webhook.server.http1 import Connection, Phase
from webhook.server.limits import Limits
from webhook.server.reader import Request
from webhook.server.tlscontext import server_context
from webhook.server.tlsproto import accept_tls
from webhook.server.wsgi import Answer

# Far longer than the test waits: a close that waits for the client's close_notify cannot pass.
SHUTDOWN_TIMEOUT = 600.0
WAIT = 60.0


class Owner:
    """The worker's side of a connection: every request answered `{}`."""

    draining = False
    access_log = False

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.forgotten = loop.create_future()

    def answer_now(self, request: Request) -> Answer | None:
        return None  # in "the pool", as for any request the loop does not answer itself

    def run_app(self, environ: dict[str, Any]) -> asyncio.Future[Answer]:
        answer: asyncio.Future[Answer] = self.loop.create_future()
        answer.set_result(("200 OK", [("Content-Type", "application/json")], b"{}"))
        return answer

    def forget(self, connection: Connection) -> None:
        if not self.forgotten.done():
            self.forgotten.set_result(None)

    def closed_by_server(self, reason: str) -> None:
        pass


def test_an_idle_connection_is_closed_with_close_notify_without_waiting_for_the_clients(certs: Path) -> None:
    answered, closed_by_test = threading.Event(), threading.Event()
    client_context = ssl.create_default_context(cafile=str(certs / tls.CA_CERT))

    def client(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw:
            sock = client_context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
            sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            response = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
            response.begin()
            assert response.status == 200 and response.read() == b"{}"
            answered.set()
            # b"" is the server's close_notify; a close without one raises SSLEOFError here.
            seen = sock.recv(1)
            # Stay connected (never sending our own close_notify or a FIN) until the server has let go.
            closed_by_test.wait(WAIT)
            return seen

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        owner = Owner(loop)
        sock, talking = await accept_from(client)
        connection = Connection(owner, Limits(), loop, "https")
        context = server_context(certs / tls.TLS_CERT, certs / tls.TLS_KEY)
        await accept_tls(loop, sock, connection, context, WAIT, SHUTDOWN_TIMEOUT)
        assert await asyncio.to_thread(answered.wait, WAIT)
        assert connection.phase is Phase.IDLE
        connection.drain()
        try:
            await asyncio.wait_for(owner.forgotten, WAIT)
        finally:
            closed_by_test.set()
        return await talking

    assert asyncio.run(scenario()) == b""
