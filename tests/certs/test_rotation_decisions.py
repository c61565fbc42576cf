"""The pure decisions of run-time certificate rotation (webhook.kube.renewal), table by table."""

from __future__ import annotations

import datetime

import pytest

from webhook.kube.renewal import (
    SETTLE,
    CAState,
    Cert,
    Published,
    ServingCert,
    Step,
    advance,
    all_trust,
    ca_step,
    needs_patch,
    serving_renewal,
    settle_time,
    trusted_after,
)

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
NAMES = ("svc", "svc.ns", "svc.ns.svc")


def at(days: float) -> datetime.datetime:
    return T0 + DAY * days


def cert(name: str, issued: float, expires: float) -> Cert:
    return Cert(name, at(issued), at(expires))


# A CA made at day 0 for 300 days: due for renewal at day 200.
CA1 = cert("ca1", 0, 300)
CA2 = cert("ca2", 200, 500)  # its successor, made when CA1 was due
CA0 = cert("ca0", -200, 100)  # CA1's predecessor, trusted until it expires
CA_SHORT = Cert("short", T0, T0 + datetime.timedelta(seconds=60))


def state(current: Cert = CA1, upcoming: Cert | None = None, *trusted: Cert, renew: bool = False) -> CAState:
    return CAState(current, upcoming, trusted or tuple(c for c in (current, upcoming) if c), 7, renew)


CA_STEPS = [
    # (case, state, now, next published, step)
    ("no Secret yet", None, at(0), True, Step.CREATE),
    ("young CA", state(), at(10), True, Step.KEEP),
    ("just before two thirds", state(), at(199.9), True, Step.KEEP),
    ("two thirds through its life", state(), at(200), True, Step.ADD_NEXT),
    ("asked for a new CA by an operator", state(renew=True), at(10), True, Step.ADD_NEXT),
    ("successor not trusted everywhere yet", state(CA1, CA2), at(250), False, Step.KEEP),
    (
        "successor trusted, API servers still loading it",
        state(CA1, CA2),
        at(200) + SETTLE / 2,
        True,
        Step.KEEP,
    ),
    ("successor trusted and settled", state(CA1, CA2), at(200) + SETTLE, True, Step.PROMOTE),
    ("signing CA expired, successor valid", state(CA1, CA2), at(300), False, Step.PROMOTE),
    ("signing CA expired, no successor", state(), at(300), True, Step.CREATE),
    ("predecessor still valid: kept", state(CA1, None, CA0, CA1), at(99), True, Step.KEEP),
    ("predecessor expired: dropped", state(CA1, None, CA0, CA1), at(100), True, Step.SYNC_TRUST),
    ("signing CA missing from the bundle", state(CA1, None, CA0), at(10), True, Step.SYNC_TRUST),
]


@pytest.mark.parametrize(
    ("case", "ca_state", "now", "published", "step"), CA_STEPS, ids=[c[0] for c in CA_STEPS]
)
def test_the_next_change_to_the_ca_secret(
    case: str, ca_state: CAState | None, now: datetime.datetime, published: bool, step: Step
) -> None:
    assert ca_step(ca_state, now, next_published=published) is step


FRESH = cert("fresh", 200, 500)
ADVANCES = [
    # (case, state, step, now, fresh, current, next, trusted fingerprints, renew requested)
    ("first CA", None, Step.CREATE, at(0), FRESH, "fresh", None, ("fresh",), False),
    (
        "successor joins the bundle",
        state(CA1, None, CA0, CA1),
        Step.ADD_NEXT,
        at(200),
        FRESH,
        "ca1",
        "fresh",
        ("ca1", "fresh"),
        False,
    ),
    (
        "operator's request answered",
        state(renew=True),
        Step.ADD_NEXT,
        at(10),
        FRESH,
        "ca1",
        "fresh",
        ("ca1", "fresh"),
        False,
    ),
    (
        "promotion keeps the old CA trusted",
        state(CA1, CA2),
        Step.PROMOTE,
        at(201),
        None,
        "ca2",
        None,
        ("ca1", "ca2"),
        False,
    ),
    (
        "expired CAs leave, nothing else",
        state(CA1, None, CA0, CA1),
        Step.SYNC_TRUST,
        at(100),
        None,
        "ca1",
        None,
        ("ca1",),
        False,
    ),
    (
        "a missing signing CA is added",
        state(CA1, None, CA0),
        Step.SYNC_TRUST,
        at(10),
        None,
        "ca1",
        None,
        ("ca0", "ca1"),
        False,
    ),
    (
        "too late for overlap: valid CAs stay",
        state(CA2, None, CA1, CA2),
        Step.CREATE,
        at(300),
        FRESH,
        "fresh",
        None,
        ("ca2", "fresh"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("case", "ca_state", "step", "now", "fresh", "current", "upcoming", "trusted", "renew"),
    ADVANCES,
    ids=[c[0] for c in ADVANCES],
)
def test_the_secret_after_a_step(
    case: str,
    ca_state: CAState | None,
    step: Step,
    now: datetime.datetime,
    fresh: Cert | None,
    current: str,
    upcoming: str | None,
    trusted: tuple[str, ...],
    renew: bool,
) -> None:
    after = advance(ca_state, step, now, fresh, generation_floor=3)
    assert after.current.fingerprint == current
    assert (after.next.fingerprint if after.next else None) == upcoming
    assert tuple(c.fingerprint for c in after.trusted) == trusted
    assert after.renew_requested is renew
    # Generations only grow; a first CA starts above every generation found on the configurations.
    assert after.generation == (4 if ca_state is None else ca_state.generation + 1)


@pytest.mark.parametrize(
    ("ca_state", "step", "fresh"),
    [
        (None, Step.PROMOTE, None),
        (None, Step.CREATE, None),
        (state(), Step.PROMOTE, None),
        (state(), Step.KEEP, None),
    ],
)
def test_a_step_that_cannot_apply_is_refused(
    ca_state: CAState | None, step: Step, fresh: Cert | None
) -> None:
    with pytest.raises(ValueError, match=step.value):
        advance(ca_state, step, at(0), fresh)


def test_every_state_reaches_keep_and_never_signs_with_an_untrusted_ca() -> None:
    """A CA's whole life, a day at a time, with every configuration following the bundle at once: the CA
    that signs is always in the bundle, and the CA it replaced stays there until it expires."""
    current: CAState | None = None
    made = 0
    signers: list[Cert] = []
    for day in range(0, 1200):
        now = at(day) + SETTLE * 2
        for _ in range(4):
            step = ca_step(current, now, next_published=True)
            if step is Step.KEEP:
                break
            fresh = None
            if step in (Step.CREATE, Step.ADD_NEXT):
                made += 1
                fresh = Cert(f"ca{made}", now, now + DAY * 300)
            current = advance(current, step, now, fresh)
        else:
            pytest.fail(f"day {day}: no KEEP after four steps")
        assert current is not None
        assert current.current in current.trusted
        if not signers or signers[-1] != current.current:
            signers.append(current.current)
        for old in signers[:-1]:
            assert (old in current.trusted) is (not old.expired(now)), f"day {day}: {old.fingerprint}"
    assert made == 6 and [s.fingerprint for s in signers] == [f"ca{i}" for i in range(1, 7)]


def test_a_short_lived_ca_settles_for_a_tenth_of_its_life() -> None:
    assert settle_time(CA1) == SETTLE
    assert settle_time(CA_SHORT) == datetime.timedelta(seconds=6)


def test_trusted_after_keeps_the_order_and_adds_the_next_ca() -> None:
    assert [c.fingerprint for c in trusted_after(state(CA1, CA2, CA0, CA1), at(50))] == ["ca0", "ca1", "ca2"]


SERVING = [
    # (case, serving certificate, signer, now, reason)
    ("none yet", None, CA1, at(1), "no serving certificate"),
    ("fresh", ServingCert(cert("s", 0, 90), "ca1", NAMES), CA1, at(10), None),
    ("two thirds through", ServingCert(cert("s", 0, 90), "ca1", NAMES), CA1, at(60), "due for renewal"),
    ("expired", ServingCert(cert("s", 0, 90), "ca1", NAMES), CA1, at(90), "expired"),
    (
        "from the previous CA",
        ServingCert(cert("s", 150, 240), "ca1", NAMES),
        CA2,
        at(201),
        "signed by another CA",
    ),
    ("from no known CA", ServingCert(cert("s", 0, 90), None, NAMES), CA1, at(1), "signed by another CA"),
    ("names changed", ServingCert(cert("s", 0, 90), "ca1", NAMES[:2]), CA1, at(1), "issued for other names"),
    ("same names, other order", ServingCert(cert("s", 0, 90), "ca1", NAMES[::-1]), CA1, at(1), None),
    # Cut short by its CA: a new one from the same CA would not last longer; the next CA will sign.
    ("cut short by the CA's expiry", ServingCert(cert("s", 250, 300), "ca1", NAMES), CA1, at(290), None),
]


@pytest.mark.parametrize(("case", "serving", "signer", "now", "reason"), SERVING, ids=[c[0] for c in SERVING])
def test_when_the_serving_certificate_is_issued_again(
    case: str, serving: ServingCert | None, signer: Cert, now: datetime.datetime, reason: str | None
) -> None:
    assert serving_renewal(serving, signer, NAMES, now) == reason


PATCHES = [
    # (case, configuration, state, patch?)
    ("no caBundle yet", Published(((), ()), None), state(), True),
    ("already current", Published((("ca1",), ("ca1",)), 7), state(), False),
    ("one entry behind", Published((("ca1",), ()), 7), state(), True),
    ("same CAs, other order", Published((("ca1", "ca0"),), 7), state(CA1, None, CA0, CA1), True),
    ("written from an older Secret", Published((("ca0",),), 6), state(), True),
    ("written from a newer Secret: left alone", Published((("ca1", "ca2"),), 8), state(), False),
    ("re-created by Helm without the annotation", Published((("ca0",),), None), state(), True),
]


@pytest.mark.parametrize(("case", "config", "ca_state", "patch"), PATCHES, ids=[c[0] for c in PATCHES])
def test_when_a_configuration_is_patched(
    case: str, config: Published, ca_state: CAState, patch: bool
) -> None:
    assert needs_patch(config, ca_state) is patch


TRUST = [
    (
        "every entry of every configuration",
        [Published((("a", "b"), ("b",)), 1), Published((("b",),), 1)],
        True,
    ),
    ("one entry lacks it", [Published((("a", "b"), ("a",)), 1)], False),
    ("no configuration found", [], True),
]


@pytest.mark.parametrize(("case", "configs", "trusted"), TRUST, ids=[c[0] for c in TRUST])
def test_a_ca_is_trusted_only_when_every_entry_carries_it(
    case: str, configs: list[Published], trusted: bool
) -> None:
    assert all_trust(configs, "b") is trusted
