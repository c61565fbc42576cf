"""When the webhook's own certificates change: the pure decisions of run-time rotation.

The webhook keeps a CA in a Secret, issues its serving certificate from it, and keeps the `caBundle` of its
webhook configurations current. Every replica runs the same loop; these functions decide, from what one pass
read (plain data: fingerprints and times, no keys, no client), what that pass must change. Applying the
answer is the caller's I/O, guarded by resourceVersions so that replicas racing each other converge.

The overlap that keeps admission working through a CA rotation, in order:
1. a CA two thirds through its life gets a *next* CA, trusted (added to the bundle) but not yet signing;
2. once every webhook configuration trusts the next CA, and the API servers had time to load it
   (`settle`), the next CA is promoted: from then on it signs, and each replica re-issues its serving
   certificate from it;
3. the old CA stays trusted until it expires: no serving certificate outlives the CA that signed it, so
   by then none that it signed is still in use. A CA leaves the bundle only by expiring.
A serving certificate is renewed two thirds through its life, or as soon as another CA signs.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

# Renewal two thirds through a certificate's life: a third of it is left to retry a failing renewal.
RENEW_FRACTION = 2 / 3
# How long the API servers get to load a changed caBundle before a CA it added signs anything. Each one
# follows webhook configurations through an informer, normally within a second.
SETTLE = datetime.timedelta(minutes=1)


@dataclass(frozen=True)
class Cert:
    """What the decisions need of a certificate: its identity and its life."""

    fingerprint: str
    issued_at: datetime.datetime
    not_after: datetime.datetime

    @property
    def renew_at(self) -> datetime.datetime:
        return self.issued_at + (self.not_after - self.issued_at) * RENEW_FRACTION

    def expired(self, now: datetime.datetime) -> bool:
        return now >= self.not_after


@dataclass(frozen=True)
class CAState:
    """The CA Secret: the signing CA, the next one (trusted, not yet signing), and the CAs to trust in the
    order the caBundle lists them. `generation` counts the Secret's changes (see `needs_patch`)."""

    current: Cert
    next: Cert | None
    trusted: tuple[Cert, ...]
    generation: int
    renew_requested: bool = False  # an operator asked for a new CA now (with the usual overlap)


class Step(enum.Enum):
    """One change to the CA Secret; a pass applies one at a time until KEEP."""

    CREATE = "create"  # no usable CA: a new one signs at once
    ADD_NEXT = "add-next"  # the signing CA is due for renewal: trust its successor first
    PROMOTE = "promote"  # the successor is trusted everywhere: it signs from now on
    SYNC_TRUST = "sync-trust"  # drop expired CAs from the bundle, add a missing signing or next CA
    KEEP = "keep"


def settle_time(ca: Cert) -> datetime.timedelta:
    """SETTLE, or a tenth of the CA's life for a short-lived one (tests rotate CAs within a minute)."""
    return min(SETTLE, (ca.not_after - ca.issued_at) / 10)


def trusted_after(state: CAState, now: datetime.datetime) -> tuple[Cert, ...]:
    """The bundle as it should be: the CAs still valid, in their order, plus the signing and next CA."""
    kept = [ca for ca in state.trusted if not ca.expired(now)]
    for ca in (state.current, state.next):
        if ca is not None and not ca.expired(now) and ca.fingerprint not in {c.fingerprint for c in kept}:
            kept.append(ca)
    return _unique(kept)


def ca_step(state: CAState | None, now: datetime.datetime, *, next_published: bool) -> Step:
    """The next change to the CA Secret. `next_published`: every webhook configuration found trusts the
    next CA (vacuously true when there is none to find)."""
    if state is None:
        return Step.CREATE
    if state.current.expired(now):
        # Too late for an overlap (the webhook was down for long): a trusted successor signs at once, or
        # a new CA does.
        return Step.PROMOTE if state.next is not None and not state.next.expired(now) else Step.CREATE
    if state.next is None and (now >= state.current.renew_at or state.renew_requested):
        return Step.ADD_NEXT
    if state.next is not None and next_published and now >= state.next.issued_at + settle_time(state.next):
        return Step.PROMOTE
    if _fingerprints(trusted_after(state, now)) != _fingerprints(state.trusted):
        return Step.SYNC_TRUST
    return Step.KEEP


def advance(
    state: CAState | None,
    step: Step,
    now: datetime.datetime,
    fresh: Cert | None = None,
    *,
    generation_floor: int = 0,
) -> CAState:
    """The Secret after `step`; CREATE and ADD_NEXT take the `fresh` CA the caller made. A first CA gets
    a generation above `generation_floor` (the highest one found on the configurations): generations only
    grow, even when the Secret was deleted and is made again."""
    if step in (Step.CREATE, Step.ADD_NEXT) and fresh is None:
        raise ValueError(f"{step.value}: a fresh CA is needed")
    if state is None:
        if step is not Step.CREATE or fresh is None:
            raise ValueError(f"{step.value}: there is no CA yet")
        return CAState(current=fresh, next=None, trusted=(fresh,), generation=generation_floor + 1)
    generation = state.generation + 1
    if step is Step.CREATE and fresh is not None:
        kept = [ca for ca in state.trusted if not ca.expired(now)]
        return CAState(fresh, None, _unique([*kept, fresh]), generation)
    if step is Step.ADD_NEXT and fresh is not None:
        updated = replace(state, next=fresh, generation=generation, renew_requested=False)
    elif step is Step.PROMOTE and state.next is not None:
        updated = CAState(state.next, None, state.trusted, generation)
    elif step is Step.SYNC_TRUST:
        updated = replace(state, generation=generation)
    else:
        raise ValueError(f"{step.value}: nothing to apply")
    return replace(updated, trusted=trusted_after(updated, now))


def serving_renewal(
    serving: ServingCert | None, signer: Cert, names: Iterable[str], now: datetime.datetime
) -> str | None:
    """Why the serving certificate must be issued again (from `signer`), or None to keep it."""
    if serving is None:
        return "no serving certificate"
    if serving.issuer != signer.fingerprint:
        return "signed by another CA"
    if set(serving.names) != set(names):
        return "issued for other names"
    if serving.cert.expired(now):
        return "expired"
    # A certificate cut short by its CA's expiry would come out no longer: it waits for the next CA.
    if now >= serving.cert.renew_at and serving.cert.not_after < signer.not_after:
        return "due for renewal"
    return None


@dataclass(frozen=True)
class ServingCert:
    """The serving certificate in use: its life, the fingerprint of the known CA that signed it (None if
    none did) and the names it is valid for."""

    cert: Cert
    issuer: str | None
    names: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    """One webhook configuration as found: each entry's caBundle (CA fingerprints, in order) and the
    generation of the CA Secret it was last written from (None: not written by a rotator)."""

    bundles: tuple[tuple[str, ...], ...]
    generation: int | None

    def trusts(self, fingerprint: str) -> bool:
        return all(fingerprint in bundle for bundle in self.bundles)


def needs_patch(config: Published, state: CAState) -> bool:
    """Whether this pass writes `state.trusted` into the configuration. Never over one written from a newer
    Secret: a replica that read the Secret before another one changed it must not undo that change."""
    if config.generation is not None and config.generation > state.generation:
        return False
    desired = _fingerprints(state.trusted)
    return any(bundle != desired for bundle in config.bundles)


def all_trust(configs: Iterable[Published], fingerprint: str) -> bool:
    """Every configuration found trusts the CA (true when none is found: nothing calls the webhook)."""
    return all(config.trusts(fingerprint) for config in configs)


def _fingerprints(certs: Iterable[Cert]) -> tuple[str, ...]:
    return tuple(cert.fingerprint for cert in certs)


def _unique(certs: Iterable[Cert]) -> tuple[Cert, ...]:
    seen: set[str] = set()
    kept = []
    for cert in certs:
        if cert.fingerprint not in seen:
            seen.add(cert.fingerprint)
            kept.append(cert)
    return tuple(kept)
