"""The CA Secret and the webhook configurations' caBundles, in the terms of the renewal decisions.

`SecretView.parse` reads the Secret into a `CAState` (the certificates as fingerprints and times) with the
CA key pairs behind it, or finds it unusable (a new CA then replaces it); `SecretView.body` writes a state
back as the Secret. `ConfigView.published` reads which CAs each webhook entry of a configuration trusts.
No request is made here: webhook.kube.rotator reads and writes the objects.

The Secret holds `ca.crt`/`ca.key` (the signing CA), `next-ca.crt`/`next-ca.key` while a successor waits to
be trusted everywhere, and `ca-bundle.crt`, the PEM that every webhook entry's caBundle must carry.
"""

from __future__ import annotations

import base64
import datetime
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from webhook.files import tls
from webhook.kube.renewal import CAState, Cert, Published

log = logging.getLogger(__name__)

CA_CERT, CA_KEY = "ca.crt", "ca.key"
NEXT_CERT, NEXT_KEY = "next-ca.crt", "next-ca.key"
BUNDLE = "ca-bundle.crt"
GENERATION = "priority-webhook.io/ca-generation"
# Set on the Secret (any value) to have a new CA made now, with the same overlap as a scheduled one.
RENEW = "priority-webhook.io/renew-ca"


@dataclass(frozen=True)
class RotationSettings:
    namespace: str
    secret: str
    configuration: str | None  # the name of both webhook configurations; None: none to keep current
    service: str
    cert_dir: Path
    ca_lifetime: datetime.timedelta
    cert_lifetime: datetime.timedelta

    @property
    def names(self) -> list[str]:
        return tls.service_names(self.service, self.namespace)


def cert_info(cert: x509.Certificate) -> Cert:
    """Our certificates start CLOCK_SKEW before they were made (see webhook.files.tls): their life counts
    from the moment they were made."""
    return Cert(
        fingerprint=cert.fingerprint(hashes.SHA256()).hex(),
        issued_at=cert.not_valid_before_utc + tls.CLOCK_SKEW,
        not_after=cert.not_valid_after_utc,
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pair(cert_pem: bytes, key_pem: bytes) -> tls.KeyPair:
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an EC private key")
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        raise ValueError("the key does not match the certificate")
    return tls.KeyPair(cert, key)


@dataclass
class SecretView:
    """The CA Secret as read: the decision state, the material behind it, and what an update needs."""

    state: CAState | None
    keys: dict[str, tls.KeyPair]  # fingerprint -> CA with its key (the signing and next CAs)
    certs: dict[str, x509.Certificate]  # fingerprint -> every CA named in the state
    obj: dict[str, Any] | None  # the Secret as the API returned it (None: absent)

    @property
    def generation(self) -> int:
        """The generation annotation, even of a Secret whose data is unusable (0 when there is none)."""
        if self.obj is None:
            return 0
        value = (self.obj["metadata"].get("annotations") or {}).get(GENERATION, "")
        return int(value) if value.isdigit() else 0

    @classmethod
    def parse(cls, obj: dict[str, Any] | None) -> SecretView:
        if obj is None:
            return cls(None, {}, {}, None)
        try:
            data = {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
            current = _key_pair(data[CA_CERT], data[CA_KEY])
            upcoming = _key_pair(data[NEXT_CERT], data[NEXT_KEY]) if NEXT_CERT in data else None
            bundle = x509.load_pem_x509_certificates(data[BUNDLE]) if data.get(BUNDLE) else []
            annotations = obj["metadata"].get("annotations") or {}
            generation = int(annotations.get(GENERATION, "0"))
        except (KeyError, ValueError, TypeError) as err:
            log.warning("CA Secret unusable (%s): a new CA replaces it", type(err).__name__)
            return cls(None, {}, {}, obj)
        keys = {cert_info(pair.cert).fingerprint: pair for pair in (current, upcoming) if pair is not None}
        certs = {cert_info(c).fingerprint: c for c in bundle} | {fp: p.cert for fp, p in keys.items()}
        state = CAState(
            current=cert_info(current.cert),
            next=cert_info(upcoming.cert) if upcoming is not None else None,
            trusted=tuple(cert_info(c) for c in bundle),
            generation=generation,
            renew_requested=RENEW in annotations,
        )
        return cls(state, keys, certs, obj)

    def bundle_pem(self, state: CAState) -> bytes:
        return b"".join(_pem(self.certs[ca.fingerprint]) for ca in state.trusted)

    def body(self, settings: RotationSettings, state: CAState) -> dict[str, Any]:
        """The Secret holding `state`: what was read, with its data and generation replaced."""
        if self.obj is not None:
            obj = {key: value for key, value in self.obj.items() if key not in ("data", "stringData")}
            metadata = dict(obj["metadata"])
        else:
            obj = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}
            metadata = {
                "name": settings.secret,
                "namespace": settings.namespace,
                "labels": {
                    "app.kubernetes.io/part-of": "priority-webhook",
                    "app.kubernetes.io/component": "webhook",
                    "app.kubernetes.io/managed-by": "priority-webhook",
                },
            }
        annotations = {**(metadata.get("annotations") or {}), GENERATION: str(state.generation)}
        if not state.renew_requested:
            annotations.pop(RENEW, None)
        metadata["annotations"] = annotations
        obj["metadata"] = metadata
        current = self.keys[state.current.fingerprint]
        data = {CA_CERT: current.cert_pem(), CA_KEY: current.key_pem(), BUNDLE: self.bundle_pem(state)}
        if state.next is not None:
            upcoming = self.keys[state.next.fingerprint]
            data |= {NEXT_CERT: upcoming.cert_pem(), NEXT_KEY: upcoming.key_pem()}
        obj["data"] = {key: base64.b64encode(value).decode() for key, value in data.items()}
        return obj


@dataclass
class ConfigView:
    kind: str
    obj: dict[str, Any]

    @property
    def published(self) -> Published:
        bundles = []
        for hook in self.obj.get("webhooks") or []:
            encoded = (hook.get("clientConfig") or {}).get("caBundle") or ""
            try:
                found = x509.load_pem_x509_certificates(base64.b64decode(encoded))
            except ValueError:
                found = []
            bundles.append(tuple(cert_info(cert).fingerprint for cert in found))
        annotation = (self.obj["metadata"].get("annotations") or {}).get(GENERATION)
        generation = int(annotation) if annotation and annotation.isdigit() else None
        return Published(tuple(bundles), generation)
