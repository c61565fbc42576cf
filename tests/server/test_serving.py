"""The real server: `python -m webhook serve` under gunicorn (2 workers), over real TLS, as a client sees it."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import requests

from testkit.reviews import PC_GVR, patch_ops, pod, priority_class, review
from testkit.server import EXAMPLE_CLASSES, WebhookServer, webhook_server
from testkit.wait import wait_for
from webhook.server.app import MAX_BODY_BYTES

READ_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def metrics_parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("metrics")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, metrics_parent: Path) -> Iterator[WebhookServer]:
    tmp = tmp_path_factory.mktemp("server")
    with webhook_server(tmp, env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_parent)}) as running:
        yield running


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    """A server with a short read timeout, for the tests of silent clients (the others keep the default, so
    that a test process paused by a loaded machine never trips it)."""
    tmp = tmp_path_factory.mktemp("strict")
    with webhook_server(
        tmp, "--classes", str(EXAMPLE_CLASSES), "--read-timeout", str(READ_TIMEOUT)
    ) as running:
        yield running


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    """One worker holding at most 8 connections, idle ones for 1 s; a request deadline longer than the tests."""
    tmp = tmp_path_factory.mktemp("limited")
    with webhook_server(
        tmp,
        "--classes",
        str(EXAMPLE_CLASSES),
        "--workers",
        "1",
        "--max-connections",
        "8",
        "--keepalive",
        "1",
        "--read-timeout",
        "60",
    ) as running:
        yield running


def tls_client(server: WebhookServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.ca_file))


def https(server: WebhookServer, host: str = "127.0.0.1", **kwargs: Any) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(host, server.port, context=tls_client(server), timeout=10, **kwargs)


def raw_tls(
    server: WebhookServer, context: ssl.SSLContext | None = None, timeout: float = 10
) -> ssl.SSLSocket:
    sock = socket.create_connection((server.host, server.port), timeout=timeout)
    return (context or tls_client(server)).wrap_socket(sock, server_hostname="localhost")


def read_response(sock: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
    response.begin()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


# -- TLS --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_chain_and_hostname_verify_with_our_ca(server: WebhookServer, host: str) -> None:
    conn = https(server, host)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")
    conn.close()


def test_verification_fails_without_our_ca_or_with_another_name(server: WebhookServer) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url + "/healthz", timeout=5)  # system roots only
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        sock = socket.create_connection((server.host, server.port), timeout=5)
        tls_client(server).wrap_socket(sock, server_hostname="evil.example").close()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1:DeprecationWarning")
def test_tls_1_1_is_refused_and_1_2_accepted(server: WebhookServer) -> None:
    old = tls_client(server)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    # The server refuses the handshake (asyncio's TLS drops the connection without sending its alert, so the
    # client sees either the alert or the connection end).
    with pytest.raises(ssl.SSLError, match=r"(?i)protocol version|EOF"):
        raw_tls(server, old).close()
    v12 = tls_client(server)
    v12.maximum_version = ssl.TLSVersion.TLSv1_2
    with raw_tls(server, v12) as sock:
        assert sock.version() == "TLSv1.2"


# -- reviews ----------------------------------------------------------------------------------------------


def test_mutate_patch_gives_the_expected_pod(server: WebhookServer) -> None:
    obj = pod(class_name="batch")
    resp = server.review("/mutate", review(obj, uid="uid-42"))
    assert resp.status_code == 200 and resp.headers["Content-Type"] == "application/json"
    body = resp.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["response"]["uid"] == "uid-42"
    mutated = jsonpatch.apply_patch(obj, patch_ops(body))
    assert mutated["spec"] == {**obj["spec"], "priority": 100, "preemptionPolicy": "Never"}


def test_v1beta1_review_is_answered_in_v1beta1(server: WebhookServer) -> None:
    body = server.review("/mutate", review(pod(), version="admission.k8s.io/v1beta1", uid="old")).json()
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["uid"] == "old"
    assert body["response"]["allowed"] is True


def test_denials_are_403_forbidden_with_the_upstream_message(server: WebhookServer) -> None:
    mutate = server.review("/mutate", review(pod(class_name="high", priority=7))).json()["response"]
    assert mutate["allowed"] is False and mutate["status"]["code"] == 403
    assert mutate["status"]["reason"] == "Forbidden"
    assert mutate["status"]["message"].startswith(
        'pods "web" is forbidden: the integer value of priority (7)'
    )
    delete = server.review(
        "/validate",
        review(None, operation="DELETE", gvr=PC_GVR, old=priority_class("system-node-critical", 1)),
    ).json()["response"]
    assert delete["allowed"] is False and "cannot be deleted" in delete["status"]["message"]


def test_validate_allows_the_mutated_pod(server: WebhookServer) -> None:
    obj = pod(class_name="high")
    mutated = jsonpatch.apply_patch(obj, patch_ops(server.review("/mutate", review(obj)).json()))
    resp = server.review("/validate", review(mutated)).json()["response"]
    assert resp["allowed"] is True and "patch" not in resp


@pytest.mark.parametrize(
    ("headers", "data", "error"),
    [
        ({"Content-Type": "application/json"}, b"nope", "body: not valid JSON"),
        ({"Content-Type": "text/plain"}, b"{}", "Content-Type: must be application/json"),
        (
            {"Content-Type": "application/json"},
            json.dumps({**review(pod()), "request": {**review(pod())["request"], "uid": None}}).encode(),
            "request.uid:",
        ),
    ],
)
def test_malformed_body_is_400(
    server: WebhookServer, headers: dict[str, str], data: bytes, error: str
) -> None:
    resp = server.session.post(server.url + "/validate", data=data, headers=headers, timeout=10)
    assert resp.status_code == 400 and resp.json()["error"].startswith(error)


def test_wrong_method_is_405(server: WebhookServer) -> None:
    resp = server.session.get(server.url + "/mutate", timeout=10)
    assert resp.status_code == 405 and resp.headers["Allow"] and "error" in resp.json()


def test_declared_oversized_body_is_refused_before_it_is_sent(server: WebhookServer) -> None:
    with raw_tls(server) as sock:
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n{" % (100 * 1024 * 1024)
        )
        status, _, body = read_response(sock)  # we never send the other 100 MiB
    assert status == 400
    assert (
        json.loads(body)["error"]
        == f"body: {100 * 1024 * 1024} bytes is over the {MAX_BODY_BYTES}-byte limit"
    )


def test_chunked_body_is_cut_at_the_limit(server: WebhookServer) -> None:
    with raw_tls(server) as sock:
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * (1024 * 1024)
        for _ in range(MAX_BODY_BYTES // len(chunk)):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        # 64 KiB over, and no terminating chunk: the server must answer without waiting for the end (gunicorn
        # reads chunked bodies in 1 KiB blocks, so a single byte over would leave it waiting for more).
        sock.sendall(b"%x\r\n%s\r\n" % (65536, b"x" * 65536))
        status, _, body = read_response(sock)
    assert status == 400 and json.loads(body)["error"] == f"body: over the {MAX_BODY_BYTES}-byte limit"


@pytest.mark.parametrize(
    ("request_bytes", "status", "error"),
    [
        (
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: abc\r\n\r\n{}",
            400,
            "request: malformed request line or headers",
        ),
        (
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Big: %s\r\n\r\n" % (b"a" * 100 * 1024),
            431,
            "headers: the request line and headers are over the 16384-byte limit",
        ),
        (
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            400,
            "body: malformed",
        ),
        (b"NOT AN HTTP REQUEST\r\n\r\n", 400, "request: malformed request line or headers"),
        (b"POST /mutate HTTP/1.1\r\n\r\n", 400, "request: malformed request line or headers"),  # no Host
    ],
    ids=["non-numeric Content-Length", "100 KB header", "bad chunk size", "bad request line", "no Host"],
)
def test_requests_that_cannot_be_parsed_get_the_one_line_json_error(
    server: WebhookServer, request_bytes: bytes, status: int, error: str
) -> None:
    """Refused before any app code runs (gunicorn answered these with an HTML page)."""
    with raw_tls(server) as sock:
        with suppress(OSError):  # the server may answer and stop reading before all of it is sent
            sock.sendall(request_bytes)
        got, headers, body = read_response(sock)
        assert closed_by_server(sock)
    assert got == status
    assert headers["content-type"] == "application/json"
    assert body.count(b"\n") == 0 and b"<" not in body
    assert json.loads(body)["error"].startswith(error)


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_stalled_bodies_are_refused_at_the_request_deadline(
    strict_server: WebhookServer, content_type: str
) -> None:
    # More stalled clients than the server has threads (2 workers x 8): each is answered 408 at its deadline
    # (whatever its Content-Type: the app sees only complete requests) and its connection closed.
    stalled = []
    for _ in range(20):
        sock = raw_tls(strict_server, timeout=30)
        sock.sendall(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\n"
            b'Content-Length: 1000\r\n\r\n{"apiVersion"' % content_type.encode()
        )
        stalled.append(sock)
    for sock in stalled:
        with sock:
            status, _, body = read_response(sock)  # the client stays silent
            assert sock.recv(1) == b""  # and the server has closed the connection
        assert status == 408
        assert json.loads(body)["error"] == f"request: not complete within {READ_TIMEOUT:g} s"
    assert strict_server.review("/mutate", review(pod())).status_code == 200


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


@pytest.mark.parametrize("stage", ["handshake", "after handshake", "headers"])
def test_clients_silent_before_their_request_ends_are_dropped(
    strict_server: WebhookServer, stage: str
) -> None:
    """A client that goes quiet during the handshake, after it, or in the middle of its headers is dropped at
    the deadline (one that started a request is told why: 408 with the JSON error)."""
    silent: list[socket.socket] = []
    for _ in range(4):
        if stage == "handshake":
            sock = socket.create_connection((strict_server.host, strict_server.port), timeout=10)
            sock.sendall(b"\x16\x03\x01")  # the start of a TLS ClientHello record, and nothing more
        elif stage == "after handshake":
            sock = raw_tls(strict_server)
        else:
            sock = raw_tls(strict_server)
            sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: loc")
        silent.append(sock)
    for sock in silent:
        with sock:
            if stage == "headers":
                status, _, body = read_response(sock)  # type: ignore[arg-type]
                assert status == 408 and json.loads(body)["error"].startswith("request: not complete")
            assert closed_by_server(sock)
    assert strict_server.review("/mutate", review(pod())).status_code == 200


def test_an_idle_kept_alive_connection_is_closed_after_keepalive(limited_server: WebhookServer) -> None:
    with raw_tls(limited_server, timeout=30) as sock:
        sock.sendall(mutate_request("kept"))
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "kept"
        answered = time.monotonic()
        assert closed_by_server(sock)
        assert time.monotonic() - answered >= 0.9  # kept for --keepalive 1 (less the clock's grain)


def test_at_max_connections_the_oldest_waiting_connection_makes_room(limited_server: WebhookServer) -> None:
    """Ten silent clients on a worker that holds eight: the oldest ones are closed, and a review on a new
    connection is answered at once (with a 60 s deadline, nothing else would close them)."""
    silent = [raw_tls(limited_server, timeout=30) for _ in range(10)]
    try:
        assert limited_server.review("/mutate", review(pod())).status_code == 200
        assert closed_by_server(silent[0]) and closed_by_server(silent[1])
    finally:
        for sock in silent:
            sock.close()


def test_chunked_body_under_the_limit_is_answered(server: WebhookServer) -> None:
    data = json.dumps(review(pod(), uid="chunky")).encode()
    resp = server.session.post(
        server.url + "/mutate",
        data=iter([data[:10], data[10:]]),  # a generator body goes out chunked
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert resp.status_code == 200 and resp.json()["response"]["uid"] == "chunky"


def test_connections_are_kept_alive(server: WebhookServer) -> None:
    conn = https(server)
    sockets = set()
    for i in range(3):
        conn.request(
            "POST", "/mutate", json.dumps(review(pod(), uid=f"k{i}")), {"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        assert json.loads(resp.read())["response"]["uid"] == f"k{i}"
        assert resp.getheader("Connection", "keep-alive").lower() == "keep-alive"
        sockets.add(id(conn.sock))
    assert len(sockets) == 1  # one TLS handshake for all three reviews
    conn.close()


def mutate_request(uid: str) -> bytes:
    body = json.dumps(review(pod(), uid=uid)).encode()
    return (
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def test_requests_back_to_back_after_a_pause_and_pipelined_share_one_connection(
    server: WebhookServer,
) -> None:
    """A kept-alive connection as the API server uses it: a request right after the answer, one after the
    connection went back to gunicorn's poller, and two sent in one write (the second read ahead with the
    first): each is answered once and in order, and the connection stays usable."""
    with raw_tls(server) as sock:
        sock.sendall(mutate_request("first"))
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "first"
        sock.sendall(mutate_request("at-once"))
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "at-once"
        # A review on another connection in between, then the kept-alive one again.
        assert server.review("/mutate", review(pod())).status_code == 200
        sock.sendall(mutate_request("after-pause"))
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "after-pause"
        sock.sendall(mutate_request("pipelined-1") + mutate_request("pipelined-2"))
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "pipelined-1"
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "pipelined-2"
    assert server.review("/mutate", review(pod())).status_code == 200


def test_hundreds_of_pipelined_reviews_answered_on_the_loop_and_in_threads_keep_their_order(
    server: WebhookServer,
) -> None:
    """Small reviews are answered on the worker's loop as soon as they are read, large ones in a pool
    thread (webhook.server.endpoint): sent in one write, interleaved, each is answered once and in order,
    and a long run of loop answers does not nest one call per request."""
    large = pod(class_name="high")
    large["metadata"]["annotations"] = {"filler": "x" * 100_000}
    large_body = json.dumps(review(large, uid="large")).encode()
    large_request = (
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(large_body), large_body)
    )
    uids = [f"p-{i}" for i in range(600)]
    wire = b"".join(large_request if i % 200 == 100 else mutate_request(uid) for i, uid in enumerate(uids))
    expected = ["large" if i % 200 == 100 else uid for i, uid in enumerate(uids)]
    with raw_tls(server, timeout=30) as sock:
        sock.sendall(wire)
        seen = [json.loads(read_response(sock)[2])["response"]["uid"] for _ in expected]
    assert seen == expected


def test_a_client_expecting_100_continue_is_told_to_send_its_body(server: WebhookServer) -> None:
    body = json.dumps(review(pod(), uid="continued")).encode()
    with raw_tls(server) as sock:
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            interim += sock.recv(1)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, _, answer = read_response(sock)
    assert status == 200 and json.loads(answer)["response"]["uid"] == "continued"


@pytest.mark.parametrize(
    "head",
    [
        b"POST /mutate HTTP/1.0\r\n",
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
    ],
    ids=["HTTP/1.0", "Connection: close"],
)
def test_a_client_that_allows_no_second_request_is_answered_and_closed(
    server: WebhookServer, head: bytes
) -> None:
    body = json.dumps(review(pod(), uid="once")).encode()
    with raw_tls(server) as sock:
        sock.sendall(
            head + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, headers, answer = read_response(sock)
        assert closed_by_server(sock)
    assert status == 200 and json.loads(answer)["response"]["uid"] == "once"
    assert headers["connection"] == "close"


def test_a_protocol_switch_offered_is_answered_as_http_1_1_or_refused_with_a_body(
    server: WebhookServer,
) -> None:
    """Over TLS only ALPN switches protocols (and the server offers HTTP/1.1): an Upgrade header is answered
    as a plain request and the connection closed; with a body it is refused, never answered without it."""
    upgrade = b"Connection: Upgrade\r\nUpgrade: h2c\r\n"
    with raw_tls(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + upgrade + b"\r\n")
        status, headers, _ = read_response(sock)
        assert status == 200 and headers["connection"] == "close" and closed_by_server(sock)
    body = json.dumps(review(pod())).encode()
    with raw_tls(server) as sock:
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: %d\r\n\r\n%s"
            % (upgrade, len(body), body)
        )
        status, _, answer = read_response(sock)
        assert closed_by_server(sock)
    assert status == 400 and json.loads(answer)["error"] == "request: a protocol switch (Upgrade) with a body"


def test_a_request_arriving_a_few_bytes_at_a_time_is_answered(server: WebhookServer) -> None:
    wire = mutate_request("dripped")
    with raw_tls(server) as sock:
        for start in range(0, len(wire), 97):
            sock.sendall(wire[start : start + 97])
        assert json.loads(read_response(sock)[2])["response"]["uid"] == "dripped"


# -- probes, metrics, logs -------------------------------------------------------------------------------


def test_readyz_with_the_static_store(server: WebhookServer) -> None:
    assert server.session.get(server.url + "/readyz", timeout=5).status_code == 200


def admission_total(text: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith("priority_webhook_admission_requests_total{") and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_add_up_across_workers(server: WebhookServer, metrics_parent: Path) -> None:
    (metrics_dir,) = list(metrics_parent.iterdir())

    def scrape() -> str:
        # a fresh connection each time: any worker may answer, and each must report the sum
        return requests.get(server.url + "/metrics", verify=str(server.ca_file), timeout=5).text

    def pids_with_counters() -> set[str]:
        return {p.stem.split("_")[-1] for p in metrics_dir.glob("counter_*.db")}

    before = admission_total(scrape(), webhook="validate", resource="pods", result="denied")
    sent = 0

    def one_more_review_reaches_both_workers() -> bool:
        nonlocal sent
        obj = pod(class_name="high", priority=1, preemptionPolicy="PreemptLowerPriority")
        resp = requests.post(
            server.url + "/validate", json=review(obj), verify=str(server.ca_file), timeout=5
        )
        assert resp.json()["response"]["allowed"] is False
        sent += 1
        return sent >= 4 and len(pids_with_counters()) >= 2

    wait_for(
        one_more_review_reaches_both_workers, timeout=60, interval=0, what="both workers to answer reviews"
    )
    for _ in range(4):
        after = admission_total(scrape(), webhook="validate", resource="pods", result="denied")
        assert after - before == sent
    histogram = [
        line
        for line in scrape().splitlines()
        if line.startswith("priority_webhook_admission_duration_seconds_count{")
    ]
    assert histogram


def test_the_access_log_has_a_line_per_request_whichever_way_it_was_answered(tmp_path: Path) -> None:
    """`--access-log`: method, path without its query, status and size, the same for a review answered on
    the worker's loop, one answered in a pool thread (over the loop's size bound) and a probe."""
    large = pod(name="large")
    large["metadata"]["annotations"] = {"filler": "x" * 100_000}
    with webhook_server(tmp_path, "--classes", str(EXAMPLE_CLASSES), "--access-log") as logged:
        small_answer = logged.session.post(
            logged.url + "/mutate?timeout=10s", json=review(pod(name="small")), timeout=10
        )
        large_answer = logged.session.post(
            logged.url + "/validate?timeout=10s", json=review(large), timeout=10
        )
        assert small_answer.status_code == large_answer.status_code == 200
        assert logged.session.get(logged.url + "/healthz", timeout=10).status_code == 200
        lines = [
            f'"POST /mutate" 200 {len(small_answer.content)} ',
            f'"POST /validate" 200 {len(large_answer.content)} ',
            '"GET /healthz" 200 ',
        ]
        # Each worker logs after it has sent its answer: wait for the lines, not for the answers.
        wait_for(lambda: all(line in logged.log() for line in lines), timeout=30, what=f"log lines {lines}")
        log = logged.log()
    assert "timeout=10s" not in log and "small" not in log


def test_no_access_log_by_default(server: WebhookServer) -> None:
    server.review("/mutate", review(pod(name="log-probe")))
    log = server.log()
    assert "Booting worker" in log
    assert "POST /mutate" not in log and "log-probe" not in log
