"""`--bind HOST:PORT`: one parser, one set of rules for `serve` and `sidecar` (only the lowest port differs)."""

from __future__ import annotations

import pytest

from webhook.cli import main
from webhook.commands.options import parse_bind


@pytest.mark.parametrize(
    ("value", "min_port", "want"),
    [
        ("127.0.0.1:8443", 1, ("127.0.0.1", 8443)),
        ("0.0.0.0:9090", 0, ("0.0.0.0", 9090)),
        ("localhost:1", 1, ("localhost", 1)),
        ("webhook.ns.svc:65535", 1, ("webhook.ns.svc", 65535)),
        ("[::1]:8443", 1, ("::1", 8443)),
        ("[::]:0", 0, ("::", 0)),
        ("[2001:DB8::1]:443", 1, ("2001:db8::1", 443)),
    ],
)
def test_accepted(value, min_port, want):
    assert parse_bind(value, min_port=min_port) == want


@pytest.mark.parametrize(
    ("value", "min_port"),
    [
        ("8443", 1),  # no host
        (":8443", 1),  # an empty host would mean every interface without saying so
        (":9090", 0),
        ("127.0.0.1:", 1),
        ("127.0.0.1:0", 1),  # serve: the API server could never find a kernel-chosen port
        ("127.0.0.1:65536", 0),
        ("127.0.0.1:99999", 0),
        ("127.0.0.1:http", 1),
        ("127.0.0.1:²", 1),  # str.isdigit() takes it, int() does not
        ("127.0.0.1:+80", 1),
        ("127.0.0.1: 80", 1),
        ("::1:8443", 1),  # IPv6 without brackets: where does the address end?
        ("[::1:8443", 1),
        ("[not-ipv6]:8443", 1),
        ("[127.0.0.1]:8443", 1),
        ("my host:8443", 1),
        ("host\n:8443", 1),
    ],
)
def test_refused(value, min_port):
    with pytest.raises(ValueError):
        parse_bind(value, min_port=min_port)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["serve", "--cert-dir", "certs", "--bind", "[::1]:0"],
            "--bind: expected HOST:PORT with a port from 1",
        ),
        (["serve", "--cert-dir", "certs", "--bind", "127.0.0.1:²"], "--bind: expected HOST:PORT"),
        (["sidecar", "--node", "n", "--bind", ":9090"], "--bind ':9090': must be HOST:PORT"),
        (["sidecar", "--node", "n", "--bind", "::1:9090"], "--bind '::1:9090': must be HOST:PORT"),
    ],
)
def test_commands_refuse_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
