"""`priority-webhook certs` and the certificate code behind it."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook.cli import main
from webhook.files import tls


def run_certs(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["certs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certs_writes_ca_and_serving_cert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run_certs(
        capsys, "--service", "pw", "--namespace", "infra", "--out", str(out_dir), "--days", "30"
    )
    assert code == 0 and err == ""
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for key in ("tls.key", "ca.key"):
        assert stat.S_IMODE((out_dir / key).stat().st_mode) == 0o600

    # stdout is exactly the caBundle: base64 of ca.crt
    assert base64.b64decode(out.strip()) == (out_dir / "ca.crt").read_bytes()

    ca, cert = load(out_dir / "ca.crt"), load(out_dir / "tls.crt")
    cert.verify_directly_issued_by(ca)
    for c in (ca, cert):
        assert isinstance(c.public_key(), ec.EllipticCurvePublicKey)
        assert c.public_key().curve.name == "secp256r1"

    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "pw",
        "pw.infra",
        "pw.infra.svc",
        "pw.infra.svc.cluster.local",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]

    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and not usage.value.key_cert_sign
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False

    ca_constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert ca_constraints.critical and ca_constraints.value.ca and ca_constraints.value.path_length == 0
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign

    now = datetime.datetime.now(datetime.UTC)
    assert cert.not_valid_before_utc <= now
    lifetime = cert.not_valid_after_utc - now
    assert datetime.timedelta(days=29, hours=23) < lifetime <= datetime.timedelta(days=30)
    assert ca.not_valid_after_utc >= cert.not_valid_after_utc

    pair = tls.load_key_pair(out_dir / "tls.crt", out_dir / "tls.key")  # the key matches the certificate
    assert pair.cert == cert


def test_certs_reuses_a_ca_for_rotation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _, bundle1, _ = run_certs(capsys, "--service", "pw", "--namespace", "ns", "--out", str(first))
    code, bundle2, _ = run_certs(
        capsys, "--service", "pw", "--namespace", "ns", "--out", str(second), "--ca-dir", str(first)
    )
    assert code == 0 and bundle1 == bundle2
    assert not (second / "ca.key").exists()  # the CA key stays where it was
    new = load(second / "tls.crt")
    new.verify_directly_issued_by(load(first / "ca.crt"))
    assert new.serial_number != load(first / "tls.crt").serial_number

    # rotating in place: same directory as the CA
    code, bundle3, _ = run_certs(
        capsys, "--service", "pw", "--namespace", "ns", "--out", str(first), "--ca-dir", str(first)
    )
    assert code == 0 and bundle3 == bundle1
    load(first / "tls.crt").verify_directly_issued_by(load(first / "ca.crt"))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--service", "Bad_Name", "--namespace", "ns"], "--service: 'Bad_Name' is not a DNS label"),
        (["--service", "pw", "--namespace", "a.b"], "--namespace: 'a.b' is not a DNS label"),
        (["--service", "pw", "--namespace", "ns", "--days", "0"], "--days: must be at least 1, got 0"),
        (
            ["--service", "pw", "--namespace", "ns", "--ca-dir", "missing"],
            "--ca-dir: missing/ca.crt does not exist",
        ),
    ],
)
def test_certs_bad_input_exits_2_with_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    error: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_certs(capsys, *args, "--out", "out")
    assert code == 2 and out == ""
    assert err.startswith(f"priority-webhook certs: error: {error}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_ca_dir_with_a_foreign_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_certs(capsys, "--service", "pw", "--namespace", "ns", "--out", str(a))
    run_certs(capsys, "--service", "pw", "--namespace", "ns", "--out", str(b))
    (a / "ca.key").write_bytes((b / "ca.key").read_bytes())
    code, _, err = run_certs(
        capsys, "--service", "pw", "--namespace", "ns", "--out", str(tmp_path / "c"), "--ca-dir", str(a)
    )
    assert code == 2 and "does not match the certificate" in err and err.count("\n") == 1


def test_serving_cert_never_outlives_its_ca() -> None:
    ca = tls.create_ca("short CA", days=2)
    serving = tls.create_serving_cert(ca, ["x"], days=365)
    assert serving.cert.not_valid_after_utc == ca.cert.not_valid_after_utc
