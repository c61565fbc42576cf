"""The pod's service account as a connection: the files and variables the kubelet provides, the token
re-read as it rotates, TLS verified against the mounted CA, and the same REST layer and reflector on top."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.kubeapi import KubeAPIServer
from testkit.wait import wait_for
from tests.cache.conftest import FAST, pc
from webhook.kube import ConfigError, rest
from webhook.kube.cache import ObjectCache
from webhook.kube.incluster import TOKEN_REREAD_SECONDS, ServiceAccount
from webhook.kube.reflector import Reflector

PCS = rest.collection(rest.SCHEDULING_V1, "priorityclasses")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tls_api() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(tls=True, token="first-token", bookmark_interval=0.2) as server:
        yield server


def environment(api: KubeAPIServer) -> dict[str, str]:
    host, _, port = api.url.removeprefix("https://").rpartition(":")
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}


def test_requests_carry_the_token_and_verify_the_server(tls_api: KubeAPIServer, tmp_path: Path) -> None:
    account = ServiceAccount.from_environment(
        environment(tls_api), tls_api.mount_service_account(tmp_path / "sa")
    )
    assert account.server == tls_api.url
    listed = rest.call_json(account, "GET", PCS, query={"labelSelector": "tier=web"})
    assert listed["items"] == []  # the system classes have no such label
    assert tls_api.requests[-1].query == {"labelSelector": "tier=web"}  # and the token was accepted
    created = rest.call_json(account, "POST", PCS, pc("made-in-a-pod", 5))
    assert created["metadata"]["name"] == "made-in-a-pod"
    account.close()


def test_another_ca_is_refused_until_the_kubelet_updates_the_bundle(
    tls_api: KubeAPIServer, tmp_path: Path
) -> None:
    """The CA file is read for each new connection: the bundle updated in place is used without a restart."""
    with KubeAPIServer(tls=True) as other:
        assert other.certificates is not None and tls_api.certificates is not None
        folder = tls_api.mount_service_account(tmp_path / "sa")
        (folder / "ca.crt").write_bytes(other.certificates.ca.read_bytes())  # not the CA of tls_api
        account = ServiceAccount.from_environment(environment(tls_api), folder)
        with pytest.raises(rest.Unreachable):
            rest.call_json(account, "GET", PCS, timeout=5)
        (folder / "ca.crt").write_bytes(tls_api.certificates.ca.read_bytes())  # the bundle as updated
        assert rest.call_json(account, "GET", PCS)["items"]


def test_a_server_that_never_answers_the_handshake_is_unreachable_after_the_connect_timeout(
    tls_api: KubeAPIServer,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # takes the connection, never speaks TLS
        account = tls_api.service_account(f"https://127.0.0.1:{silent.getsockname()[1]}")
        with pytest.raises(rest.Unreachable) as caught:
            rest.call_json(account, "GET", PCS, timeout=(0.3, 30))
    assert caught.value.kind == "ConnectTimeout" and not isinstance(caught.value, rest.ReadTimeout)


def test_a_rotated_token_is_used_within_a_minute(tls_api: KubeAPIServer, tmp_path: Path) -> None:
    folder = tls_api.mount_service_account(tmp_path / "sa")
    clock = Clock()
    account = ServiceAccount(tls_api.url, folder / "token", folder / "ca.crt", clock=clock)
    assert rest.call_json(account, "GET", PCS)["items"]
    (folder / "token").write_text("second-token")  # the kubelet's rotation
    tls_api.token = "second-token"
    clock.now += TOKEN_REREAD_SECONDS - 1  # not read again yet: the old token is refused
    with pytest.raises(rest.ApiError) as refused:
        rest.call_json(account, "GET", PCS)
    assert refused.value.status == 401
    clock.now += 1
    assert rest.call_json(account, "GET", PCS)["items"]  # the server takes only the new token now


def test_a_token_file_missing_for_a_moment_keeps_the_last_token(
    tls_api: KubeAPIServer, tmp_path: Path
) -> None:
    folder = tls_api.mount_service_account(tmp_path / "sa")
    clock = Clock()
    account = ServiceAccount(tls_api.url, folder / "token", folder / "ca.crt", clock=clock)
    (folder / "token").unlink()
    clock.now += TOKEN_REREAD_SECONDS
    assert rest.call_json(account, "GET", PCS)["items"]  # with the token read before


def test_a_reflector_syncs_and_watches_through_the_service_account(
    tls_api: KubeAPIServer, tmp_path: Path
) -> None:
    account = ServiceAccount.from_environment(
        environment(tls_api), tls_api.mount_service_account(tmp_path / "sa")
    )
    cache = ObjectCache()
    reflector = Reflector(account, PCS, cache, name="in-cluster-test", **FAST)
    reflector.start()
    try:
        assert reflector.wait_synced(5)
        tls_api.create("priorityclasses", pc("watched", 7))
        wait_for(lambda: cache.get("", "watched") is not None, timeout=5, what="the watched class")
    finally:
        reflector.stop(5)
        account.close()


@pytest.mark.parametrize(
    ("env", "files", "problem"),
    [
        (
            {},
            {"token": "t", "ca.crt": "pem"},
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "t", "ca.crt": "pem"},
            "is empty",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "https"},
            {"token": "t", "ca.crt": "pem"},
            "KUBERNETES_SERVICE_PORT is not a port number: 'https'",
        ),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, {"token": "t"}, "ca.crt"),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "t", "ca.crt": ""},
            "ca.crt is empty",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"ca.crt": "pem"},
            "token",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "\n", "ca.crt": "pem"},
            "token is empty",
        ),
    ],
    ids=["no-variables", "empty-host", "bad-port", "no-ca", "empty-ca", "no-token", "empty-token"],
)
def test_outside_a_pod_is_a_one_line_config_error(
    tmp_path: Path, env: dict[str, str], files: dict[str, str], problem: str
) -> None:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    with pytest.raises(ConfigError) as err:
        ServiceAccount.from_environment(env, tmp_path)
    message = str(err.value)
    assert message.startswith("in-cluster service account: ") and problem in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("host", "server"),
    [("10.96.0.1", "https://10.96.0.1:443"), ("fd00::1", "https://[fd00::1]:443")],
    ids=["ipv4", "ipv6"],
)
def test_the_server_address_is_joined_as_go_joins_it(tmp_path: Path, host: str, server: str) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("pem")
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    assert ServiceAccount.from_environment(env, tmp_path).server == server
