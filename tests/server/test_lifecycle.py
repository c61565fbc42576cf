"""The server's life: startup checks, a development certificate, rotation without restart, graceful SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509

from testkit.reviews import pod, review
from testkit.server import EXAMPLE_CLASSES, WebhookServer, free_port, webhook_server
from testkit.wait import wait_for
from webhook.cli import main
from webhook.files import tls

CLASSES = ("--classes", str(EXAMPLE_CLASSES))


def serial_of(der: bytes) -> int:
    return x509.load_der_x509_certificate(der).serial_number


def file_serial(cert_dir: Path) -> int:
    return x509.load_pem_x509_certificate((cert_dir / tls.TLS_CERT).read_bytes()).serial_number


def post_review(server: WebhookServer, context: ssl.SSLContext, uid: str) -> tuple[int, int, str]:
    """One review on a new connection: (status, serial of the certificate presented, uid answered)."""
    conn = http.client.HTTPSConnection("localhost", server.port, context=context, timeout=10)
    try:
        conn.request(
            "POST", "/mutate", json.dumps(review(pod(), uid=uid)), {"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        answered = json.loads(resp.read())["response"]["uid"]
        return resp.status, serial_of(conn.sock.getpeercert(binary_form=True)), answered
    finally:
        conn.close()


def test_certificate_rotation_without_restart_or_failed_request(tmp_path: Path) -> None:
    with webhook_server(tmp_path, *CLASSES) as server:
        context = ssl.create_default_context(cafile=str(server.ca_file))
        old = file_serial(server.cert_dir)
        kept = http.client.HTTPSConnection("localhost", server.port, context=context, timeout=10)
        kept.request("GET", "/healthz")
        assert kept.getresponse().read()

        seen: list[int] = []
        failures: list[str] = []
        stop = threading.Event()

        def keep_sending() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    status, serial, uid = post_review(server, context, f"r{n}")
                    if status != 200 or uid != f"r{n}":
                        failures.append(f"request {n}: {status} {uid}")
                    seen.append(serial)
                except Exception as err:  # any failure at all is what this test is about
                    failures.append(f"request {n}: {err!r}")

        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        try:
            wait_for(lambda: len(seen) >= 5, timeout=60, what="requests before the rotation")
            tls.write_certificates(server.cert_dir, ca_dir=server.cert_dir)  # key, then certificate
            new = file_serial(server.cert_dir)
            assert new != old
            # Both workers have switched once a run of new connections all present the new certificate.
            wait_for(
                lambda: len(seen) > 10 and seen[-10:] == [new] * 10,
                timeout=60,
                what="new connections to present the new certificate",
            )
        finally:
            stop.set()
            sender.join(15)
        assert failures == []
        assert seen[0] == old and new in seen and set(seen) == {old, new}

        # A client that sends no SNI (an IP address as the host) gets the new certificate too: the context
        # is chosen per connection, not through an SNI callback.
        by_ip = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
        by_ip.request("GET", "/healthz")
        assert by_ip.getresponse().status == 200
        assert serial_of(by_ip.sock.getpeercert(binary_form=True)) == new
        by_ip.close()

        # A connection opened before the rotation keeps working with the certificate it agreed on.
        kept.request("GET", "/healthz")
        assert kept.getresponse().status == 200
        assert serial_of(kept.sock.getpeercert(binary_form=True)) == old
        kept.close()


def test_sigterm_lets_an_in_flight_review_finish(tmp_path: Path) -> None:
    # A read timeout well above the test's own waits: the body pauses while the test waits for SIGTERM.
    with webhook_server(tmp_path, *CLASSES, "--graceful-timeout", "30", "--read-timeout", "60") as server:
        context = ssl.create_default_context(cafile=str(server.ca_file))
        body = json.dumps(review(pod(), uid="in-flight")).encode()
        # The TLS handshake completing proves a worker has accepted the connection.
        with context.wrap_socket(
            socket.create_connection(("127.0.0.1", server.port), 30), server_hostname="localhost"
        ) as sock:
            sock.sendall(
                b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:25])
            )
            server.process.send_signal(signal.SIGTERM)
            wait_for(
                lambda: "Handling signal: term" in server.log(), timeout=60, what="the server to get SIGTERM"
            )
            sock.sendall(body[25:])
            response = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
            response.begin()
            assert response.status == 200
            assert json.loads(response.read())["response"]["uid"] == "in-flight"
        assert server.process.wait(timeout=40) == 0
        assert "Shutting down: Master" in server.log()


def test_a_development_certificate_is_generated_into_an_empty_cert_dir(tmp_path: Path) -> None:
    cert_dir = tmp_path / "fresh"
    with webhook_server(tmp_path, *CLASSES, cert_dir=cert_dir) as server:
        assert server.session.get(server.url + "/healthz", timeout=5).status_code == 200
        assert "generated a development certificate" in server.log()
        cert = x509.load_pem_x509_certificate((cert_dir / tls.TLS_CERT).read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "priority-webhook.default.svc" in sans.get_values_for_type(x509.DNSName)
        assert (cert_dir / tls.TLS_KEY).stat().st_mode & 0o077 == 0
    # The metrics directory of that server is gone with it.
    assert "metrics directory" in server.log()
    metrics_dir = Path(server.log().split("metrics directory ", 1)[1].split()[0])
    assert not metrics_dir.exists()


def test_bad_classes_file_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [unclosed")
    cmd = [
        sys.executable,
        "-m",
        "webhook",
        "serve",
        "--bind",
        f"127.0.0.1:{free_port()}",
        "--cert-dir",
        "certs",
        "--classes",
        "bad.yaml",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("priority-webhook serve: error: bad.yaml: not valid YAML or JSON")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "certs").exists()  # nothing is done before the configuration is known good


@pytest.mark.parametrize(
    ("files", "args", "error"),
    [
        (
            {"pod.yaml": "kind: Pod\nmetadata: {name: x}\n"},
            ["--classes", "pod.yaml"],
            "expected kind PriorityClass, got 'Pod'",
        ),
        (
            {"pc.yaml": "kind: PriorityClass\nmetadata: {name: system-x}\nvalue: 1\n"},
            ["--classes", "pc.yaml"],
            "system-x",
        ),
        ({}, ["--classes", "missing.yaml"], "missing.yaml: not found"),
        ({}, ["--classes", "x.yaml", "--kubeconfig", "kc"], "--classes: cannot be combined"),
        ({"certs/tls.crt": "not a certificate"}, [], "--cert-dir: cannot load"),
        ({"certs/tls.crt": "", "certs/tls.key": ""}, [], "--cert-dir: cannot load"),
        ({}, ["--bind", "8443"], "--bind: expected HOST:PORT"),
        ({}, ["--bind", "127.0.0.1:http"], "--bind: expected HOST:PORT"),
        ({}, ["--bind", ":8443"], "--bind: expected HOST:PORT"),
        ({}, ["--bind", "127.0.0.1:70000"], "--bind: expected HOST:PORT"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    args: list[str],
    error: str,
) -> None:
    """In-process (these fail before anything is served); the exit path itself is covered just above."""
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert main(["serve", "--cert-dir", "certs", "--bind", "127.0.0.1:1", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("priority-webhook serve: error: ") and error in err, err


def test_a_killed_worker_is_replaced_and_its_counts_are_kept(tmp_path: Path) -> None:
    with webhook_server(tmp_path, *CLASSES) as server:
        context = ssl.create_default_context(cafile=str(server.ca_file))
        for i in range(6):
            assert post_review(server, context, f"before-{i}")[0] == 200

        def admitted() -> float:
            conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
            return sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("priority_webhook_admission_requests_total{")
                and 'result="allowed"' in line
            )

        assert admitted() == 6
        # Workers boot independently: one may have answered everything before the other logged its start.
        wait_for(lambda: server.log().count("Booting worker with pid") == 2, timeout=60, what="both workers")
        pids = [
            int(line.rsplit(" ", 1)[1])
            for line in server.log().splitlines()
            if "Booting worker with pid" in line
        ]
        assert len(pids) == 2
        os.kill(pids[0], signal.SIGKILL)
        wait_for(lambda: server.log().count("Booting worker with pid") == 3, timeout=60, what="a new worker")
        # Counters never go backwards: the dead worker's counts stay in the sum, the new worker adds its own.
        assert admitted() == 6
        for i in range(4):
            assert post_review(server, context, f"after-{i}")[0] == 200
        assert admitted() == 10
