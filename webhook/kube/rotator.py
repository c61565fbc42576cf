"""Run-time certificate rotation: the CA in a Secret, the serving certificate in the cert dir, the caBundle
of the webhook configurations. One `Rotator.reconcile()` is one pass of reads and the writes they call for;
`webhook.kube.renewal` decides which.

Every replica runs the same loop; nothing is elected. Replicas racing each other are kept apart by the API
server: the Secret is created once (409: another replica's CA is read and used) and updated with its
resourceVersion (409: read again), the configurations are patched with a resourceVersion test and carry
the Secret generation they were written from, so a replica with an older view never undoes a newer one.

What the Secret and the configurations hold, and how they read as decision inputs, is
webhook.kube.ca_secret. The serving key never leaves the pod: each replica issues its own certificate into
its cert dir, where the server picks it up without a restart (webhook.server.tlscontext).
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from webhook.files import tls
from webhook.kube import rest
from webhook.kube.ca_secret import GENERATION, ConfigView, RotationSettings, SecretView, cert_info
from webhook.kube.renewal import (
    CAState,
    ServingCert,
    Step,
    advance,
    all_trust,
    ca_step,
    needs_patch,
    serving_renewal,
)
from webhook.kube.rest import call_json

log = logging.getLogger(__name__)

CONFIG_KINDS = {
    "MutatingWebhookConfiguration": rest.collection(
        rest.ADMISSIONREGISTRATION_V1, "mutatingwebhookconfigurations"
    ),
    "ValidatingWebhookConfiguration": rest.collection(
        rest.ADMISSIONREGISTRATION_V1, "validatingwebhookconfigurations"
    ),
}
# Steps one pass may apply to the Secret (CREATE, then nothing; or SYNC_TRUST then ADD_NEXT): a bound, so
# a pass always ends.
MAX_STEPS = 4


@dataclass
class PassResult:
    """What one pass found and did: `ready` once the serving certificate is trusted by every configuration."""

    ready: bool
    configurations_found: int
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # logged as warnings: what this pass could not do


class Conflict(Exception):
    """Another replica changed the object since this pass read it: read again."""


class Rotator:
    def __init__(
        self,
        api_client: rest.Client,
        settings: RotationSettings,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.api, self.settings, self.clock = api_client, settings, clock

    # -- the CA Secret ----------------------------------------------------------------------------------
    def _secret_path(self, name: str | None = None) -> str:
        path = rest.collection(rest.CORE_V1, "secrets", self.settings.namespace)
        return rest.named(path, name) if name else path

    def read_secret(self) -> SecretView:
        try:
            return SecretView.parse(call_json(self.api, "GET", self._secret_path(self.settings.secret)))
        except rest.ApiError as err:
            if err.status == 404:
                return SecretView.parse(None)
            raise

    def _write_secret(self, view: SecretView, state: CAState) -> None:
        body = view.body(self.settings, state)
        try:
            if view.obj is None:
                call_json(self.api, "POST", self._secret_path(), body)
            else:
                call_json(self.api, "PUT", self._secret_path(self.settings.secret), body)
        except rest.ApiError as err:
            if err.status == 409:  # created or changed by another replica first: use theirs
                raise Conflict from None
            raise

    def _settle_ca(self, configs: list[ConfigView], actions: list[str]) -> SecretView:
        """Apply the Secret's due steps, one at a time, re-reading after each write (or lost race)."""
        view = self.read_secret()
        for _ in range(MAX_STEPS):
            now = self.clock()
            published = [c.published for c in configs]
            upcoming = view.state.next if view.state is not None else None
            step = ca_step(
                view.state, now, next_published=upcoming is None or all_trust(published, upcoming.fingerprint)
            )
            if step is Step.KEEP:
                return view
            fresh = None
            if step in (Step.CREATE, Step.ADD_NEXT):
                pair = tls.create_ca(
                    f"{self.settings.service}.{self.settings.namespace}.svc CA",
                    lifetime=self.settings.ca_lifetime,
                )
                fresh = cert_info(pair.cert)
                view.keys[fresh.fingerprint], view.certs[fresh.fingerprint] = pair, pair.cert
            floor = max([c.published.generation or 0 for c in configs] + [view.generation])
            state = advance(view.state, step, now, fresh, generation_floor=floor)
            try:
                self._write_secret(view, state)
                actions.append(f"CA Secret: {step.value} (generation {state.generation})")
            except Conflict:
                actions.append(f"CA Secret: {step.value} lost to another replica")
            view = self.read_secret()
        return view

    # -- the webhook configurations -----------------------------------------------------------------------
    def read_configs(self, problems: list[str] | None = None) -> list[ConfigView]:
        """The configurations found. One the webhook may not read (403) is left out, as one that does not
        exist is, with a line in `problems`: its trust cannot be checked nor its caBundle kept, but the
        webhook still serves (another replica or the installer may keep it); only a role fixed brings it
        back into the loop."""
        name = self.settings.configuration
        if name is None:
            return []
        found = []
        for kind, path in CONFIG_KINDS.items():
            try:
                found.append(ConfigView(kind, call_json(self.api, "GET", rest.named(path, name))))
            except rest.ApiError as err:
                if err.status == 403 and problems is not None:
                    problems.append(
                        f"{kind} {name}: may not be read (HTTP 403): its caBundle is not checked nor kept; "
                        f"grant get and patch on it"
                    )
                elif err.status != 404:
                    raise
        return found

    def _patch_config(self, config: ConfigView, state: CAState, bundle: bytes) -> bool:
        metadata = config.obj["metadata"]
        encoded = base64.b64encode(bundle).decode()
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": metadata["resourceVersion"]}
        ]
        ops += [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
            for i, _ in enumerate(config.obj.get("webhooks") or [])
        ]
        if metadata.get("annotations"):
            ops.append(
                {
                    "op": "add",
                    "path": "/metadata/annotations/" + GENERATION.replace("/", "~1"),
                    "value": str(state.generation),
                }
            )
        else:
            ops.append(
                {"op": "add", "path": "/metadata/annotations", "value": {GENERATION: str(state.generation)}}
            )
        path = rest.named(CONFIG_KINDS[config.kind], metadata["name"])
        try:
            config.obj = call_json(self.api, "PATCH", path, ops, content_type="application/json-patch+json")
        except rest.ApiError as err:
            # 409 or 422 (the resourceVersion test failed): changed since it was read; the next pass sees it.
            if err.status in (409, 422):
                return False
            raise
        return True

    # -- the serving certificate ------------------------------------------------------------------------
    def read_serving(self, view: SecretView) -> ServingCert | None:
        cert_file = self.settings.cert_dir / tls.TLS_CERT
        key_file = self.settings.cert_dir / tls.TLS_KEY
        try:
            pair = tls.load_key_pair(cert_file, key_file)
        except (OSError, ValueError):
            return None
        issuer = next((fp for fp, ca in view.certs.items() if _issued_by(pair.cert, ca)), None)
        return ServingCert(cert_info(pair.cert), issuer, _names(pair.cert))

    def _issue(self, signer: tls.KeyPair) -> tls.KeyPair:
        self.settings.cert_dir.mkdir(parents=True, exist_ok=True)
        serving = tls.create_serving_cert(signer, self.settings.names, lifetime=self.settings.cert_lifetime)
        # Key before certificate: the server reloads when tls.crt changes and then finds the matching key.
        tls.write_file(self.settings.cert_dir / tls.TLS_KEY, serving.key_pem(), 0o600)
        tls.write_file(self.settings.cert_dir / tls.TLS_CERT, serving.cert_pem(), 0o644)
        return serving

    def _write_bundle(self, bundle: bytes) -> None:
        """`ca.crt` in the cert dir: the CAs a client of this replica may trust (as the API server does)."""
        path = self.settings.cert_dir / tls.CA_CERT
        try:
            if path.read_bytes() == bundle:
                return
        except OSError:
            pass
        self.settings.cert_dir.mkdir(parents=True, exist_ok=True)
        tls.write_file(path, bundle, 0o644)

    # -- one pass ---------------------------------------------------------------------------------------
    def reconcile(self) -> PassResult:
        actions: list[str] = []
        problems: list[str] = []
        configs = self.read_configs(problems)
        view = self._settle_ca(configs, actions)
        state = view.state
        if state is None:  # every step lost a race: the next pass reads the winner's
            return PassResult(False, len(configs), actions, problems)
        bundle = view.bundle_pem(state)
        for config in configs:
            name = config.obj["metadata"]["name"]
            if needs_patch(config.published, state) and self._patch_config(config, state, bundle):
                actions.append(f"{config.kind} {name}: caBundle of {len(state.trusted)} CA(s)")
        self._write_bundle(bundle)
        serving = self.read_serving(view)
        reason = serving_renewal(serving, state.current, self.settings.names, self.clock())
        if reason is not None:
            issued = self._issue(view.keys[state.current.fingerprint])
            serving = ServingCert(
                cert_info(issued.cert), state.current.fingerprint, tuple(self.settings.names)
            )
            until = issued.cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
            actions.append(f"serving certificate issued ({reason}), valid until {until}")
        assert serving is not None
        ready = serving.issuer is not None and all_trust((c.published for c in configs), serving.issuer)
        return PassResult(ready, len(configs), actions, problems)

    def reconcile_logged(self) -> PassResult | None:
        """One pass; API and connection errors are logged in one line (the next pass retries)."""
        try:
            result = self.reconcile()
        except rest.ApiError as err:
            log.warning("certificate rotation: HTTP %s %s", err.status, err.http_reason)
            return None
        except rest.Unreachable as err:
            log.warning("certificate rotation: %s", " ".join(str(err).split())[:300])
            return None
        except Exception as err:
            # The loop must outlive a bug, or an object it cannot use: the next pass tries again.
            log.error("certificate rotation: %s: %s", type(err).__name__, " ".join(str(err).split())[:300])
            return None
        for action in result.actions:
            log.info("certificate rotation: %s", action)
        for problem in result.problems:
            log.warning("certificate rotation: %s", problem)
        return result

    def wait_ready(self, interval: float, stop: threading.Event) -> bool:
        """Passes until the serving certificate is trusted by every configuration found (False if stopped).

        A pass that cannot reach or use the API server (down, the Secret forbidden...) does not hold back a
        replica that already has a certificate: one that a past pass issued into the cert dir (a container
        restarted in its pod keeps the emptyDir), issued by a CA of the bundle that pass published, valid
        now and naming the service, is served at once; the rotation goes on in the background."""
        while not stop.is_set():
            result = self.reconcile_logged()
            if result is not None and result.ready:
                return True
            kept = self.kept_serving() if result is None else None
            if kept is not None:
                log.warning(
                    "certificate rotation: the API server could not be used; serving the certificate already "
                    "in %s meanwhile (%s)",
                    self.settings.cert_dir,
                    kept,
                )
                return True
            stop.wait(min(interval, FAST_INTERVAL))
        return False

    def kept_serving(self) -> str | None:
        """The cert dir's serving certificate, if it can be served without the API server: issued by a CA
        of its ca.crt (the bundle a past pass published), valid now, naming the service. One line saying
        so, else None."""
        cert_dir = self.settings.cert_dir
        try:
            pair = tls.load_key_pair(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY)
            bundle = x509.load_pem_x509_certificates((cert_dir / tls.CA_CERT).read_bytes())
        except (OSError, ValueError):
            return None
        now = self.clock()
        cert = pair.cert
        if not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
            return None
        if not any(_issued_by(cert, ca) for ca in bundle):
            return None
        if not set(self.settings.names) <= set(_names(cert)):
            return None
        return f"valid until {cert.not_valid_after_utc.strftime('%Y-%m-%dT%H:%M:%SZ')}"

    def run(self, interval: float, stop: threading.Event, wake: threading.Event) -> None:
        """A pass every `interval` seconds, and at once when `wake` is set, until `stop`."""
        while not stop.is_set():
            wake.clear()
            self.reconcile_logged()
            wake.wait(interval)

    def start(self, interval: float) -> threading.Event:
        """`run` on a daemon thread, woken by a watch on each webhook configuration: one re-created without
        a caBundle (a Helm or Argo CD hook) is patched within moments, not at the next interval. Set the
        returned event to stop. (Call it once the metrics directory is chosen: the watches count events.)"""
        from webhook.kube.reflector import Reflector

        stop, wake = threading.Event(), threading.Event()
        if self.settings.configuration is not None:
            for path in CONFIG_KINDS.values():
                Reflector(
                    self.api,
                    path,
                    _Waker(wake),
                    name=path.rsplit("/", 1)[1],
                    field_selector=f"metadata.name={self.settings.configuration}",
                ).start()
        threading.Thread(
            target=self.run, args=(interval, stop, wake), name="cert-rotation", daemon=True
        ).start()
        return stop


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _names(cert: x509.Certificate) -> tuple[str, ...]:
    """The DNS names and IP addresses a certificate is for."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return (*sans.get_values_for_type(x509.DNSName), *map(str, sans.get_values_for_type(x509.IPAddress)))


class _Waker:
    """A reflector's store that keeps nothing: any change to a watched configuration wakes the loop."""

    def __init__(self, wake: threading.Event) -> None:
        self.wake = wake

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        self.wake.set()

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        self.wake.set()


# How often a pass runs while the webhook is not ready yet.
FAST_INTERVAL = 1.0
