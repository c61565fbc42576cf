"""The CA Secret's wire form (webhook.kube.ca_secret.SecretView): what is written reads back as the same
state, and a Secret that cannot be used is replaced, keeping its generation count."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path
from typing import Any

import pytest

from webhook.files import tls
from webhook.kube.ca_secret import (
    BUNDLE,
    CA_CERT,
    CA_KEY,
    GENERATION,
    RENEW,
    RotationSettings,
    SecretView,
    cert_info,
)
from webhook.kube.renewal import Step, advance

SETTINGS = RotationSettings(
    namespace="ns",
    secret="pw-webhook-ca",
    configuration="pw",
    service="pw",
    cert_dir=Path("unused"),
    ca_lifetime=datetime.timedelta(days=365),
    cert_lifetime=datetime.timedelta(days=90),
)
NOW = datetime.datetime.now(datetime.UTC)


def written(view: SecretView, step: Step, fresh: tls.KeyPair | None) -> dict[str, Any]:
    info = None
    if fresh is not None:
        info = cert_info(fresh.cert)
        view.keys[info.fingerprint], view.certs[info.fingerprint] = fresh, fresh.cert
    state = advance(view.state, step, NOW, info)
    obj = view.body(SETTINGS, state)
    obj["metadata"]["resourceVersion"] = "1"
    return obj


def test_what_is_written_reads_back_through_a_rotation() -> None:
    first, second = tls.create_ca("a", days=365), tls.create_ca("b", days=365)
    created = written(SecretView.parse(None), Step.CREATE, first)
    assert created["metadata"]["name"] == "pw-webhook-ca" and created["type"] == "Opaque"
    view = SecretView.parse(created)
    assert (
        view.state is not None and view.state.current == cert_info(first.cert) and view.state.generation == 1
    )

    created["metadata"]["annotations"][RENEW] = "now"  # an operator's request
    view = SecretView.parse(created)
    assert view.state is not None and view.state.renew_requested
    with_next = written(view, Step.ADD_NEXT, second)
    assert RENEW not in with_next["metadata"]["annotations"], "answered: the request is removed"
    assert with_next["metadata"]["resourceVersion"] == "1", "an update carries what it read"
    view = SecretView.parse(with_next)
    assert view.state is not None and view.state.next == cert_info(second.cert)
    bundle = base64.b64decode(with_next["data"][BUNDLE])
    assert bundle == first.cert_pem() + second.cert_pem()

    promoted = SecretView.parse(written(view, Step.PROMOTE, None))
    assert promoted.state is not None and promoted.state.current == cert_info(second.cert)
    assert promoted.state.next is None and promoted.state.generation == 3
    assert [c.fingerprint for c in promoted.state.trusted] == [
        cert_info(first.cert).fingerprint,
        cert_info(second.cert).fingerprint,
    ]


CA = tls.create_ca("c", days=365)
OTHER = tls.create_ca("d", days=365)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


UNUSABLE = [
    ("no data", {}),
    ("no key", {CA_CERT: b64(CA.cert_pem())}),
    ("key of another CA", {CA_CERT: b64(CA.cert_pem()), CA_KEY: b64(OTHER.key_pem())}),
    ("not base64", {CA_CERT: "!!!", CA_KEY: b64(CA.key_pem())}),
    ("not PEM", {CA_CERT: b64(b"hello"), CA_KEY: b64(CA.key_pem())}),
]


@pytest.mark.parametrize(("case", "data"), UNUSABLE, ids=[c[0] for c in UNUSABLE])
def test_an_unusable_secret_is_replaced_keeping_its_generation(case: str, data: dict[str, str]) -> None:
    obj = {"metadata": {"name": "pw-webhook-ca", "annotations": {GENERATION: "5"}}, "data": data}
    view = SecretView.parse(obj)
    assert view.state is None and view.obj is obj and view.generation == 5
