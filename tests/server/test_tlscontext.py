"""Server TLS settings and certificate reload, with in-memory handshakes (no sockets, no threads)."""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from webhook.files import tls
from webhook.server.tlscontext import ReloadingContext, server_context


def handshake(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str | None = "localhost"
) -> bytes:
    """Run a TLS handshake between the two contexts over memory BIOs; the certificate the server presented."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return client.getpeercert(binary_form=True) or b""
    raise AssertionError("handshake did not finish")


def client_for(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


def serial(der: bytes) -> int:
    return x509.load_der_x509_certificate(der).serial_number


def current_serial(cert_dir: Path) -> int:
    return x509.load_pem_x509_certificate((cert_dir / tls.TLS_CERT).read_bytes()).serial_number


@pytest.fixture()
def cert_dir(tmp_path: Path) -> Path:
    tls.write_certificates(tmp_path / "certs")
    return tmp_path / "certs"


def test_chain_and_hostnames_verify(cert_dir: Path) -> None:
    ctx = server_context(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY)
    for name in ("localhost", "127.0.0.1", "priority-webhook.default.svc", "priority-webhook.default"):
        handshake(ctx, client_for(cert_dir / tls.CA_CERT), name)
    with pytest.raises(ssl.SSLCertVerificationError, match=r"(Hostname|IP address) mismatch"):
        handshake(ctx, client_for(cert_dir / tls.CA_CERT), "other.example")
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(ctx, ssl.create_default_context(), "localhost")  # system roots do not know our CA


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_below_1_2_is_refused(cert_dir: Path, version: ssl.TLSVersion) -> None:
    ctx = server_context(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY)
    old = client_for(cert_dir / tls.CA_CERT)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer the old protocol at all
    old.minimum_version = old.maximum_version = version
    # Control: this client does speak the old protocol with a server that allows it...
    permissive = server_context(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY)
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    permissive.minimum_version = version
    handshake(permissive, old)
    # ...and ours refuses it.
    with pytest.raises(ssl.SSLError, match=r"(?i)protocol version|unsupported protocol"):
        handshake(ctx, old)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    modern = client_for(cert_dir / tls.CA_CERT)
    modern.maximum_version = ssl.TLSVersion.TLSv1_2
    handshake(ctx, modern)


def test_reload_after_rotation(cert_dir: Path) -> None:
    holder = ReloadingContext(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY, interval=0)
    client = client_for(cert_dir / tls.CA_CERT)
    old = current_serial(cert_dir)
    assert serial(handshake(holder.current(), client)) == old
    tls.write_certificates(cert_dir, ca_dir=cert_dir)
    assert current_serial(cert_dir) != old
    assert serial(handshake(holder.current(), client)) == current_serial(cert_dir)


def test_no_reload_within_the_interval(cert_dir: Path) -> None:
    holder = ReloadingContext(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY, interval=3600)
    before = holder.current()
    tls.write_certificates(cert_dir, ca_dir=cert_dir)
    assert holder.current() is before


def test_half_written_pair_keeps_the_old_certificate(
    cert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    holder = ReloadingContext(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY, interval=0)
    client = client_for(cert_dir / tls.CA_CERT)
    old = current_serial(cert_dir)
    staging = cert_dir.parent / "staging"
    tls.write_certificates(staging, ca_dir=cert_dir)
    os.replace(staging / tls.TLS_KEY, cert_dir / tls.TLS_KEY)  # the key has landed, the certificate not yet
    with caplog.at_level(logging.WARNING):
        assert serial(handshake(holder.current(), client)) == old
    assert "not reloaded" in caplog.text
    os.replace(staging / tls.TLS_CERT, cert_dir / tls.TLS_CERT)
    assert serial(handshake(holder.current(), client)) == current_serial(cert_dir) != old


def test_kubernetes_secret_volume_symlink_swap(tmp_path: Path) -> None:
    """A secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>/, swapped by one rename."""
    volume = tmp_path / "volume"
    volume.mkdir()
    tls.write_certificates(volume / "..v1")
    (volume / "..data").symlink_to("..v1")
    for name in (tls.TLS_CERT, tls.TLS_KEY, tls.CA_CERT):
        (volume / name).symlink_to(f"..data/{name}")
    holder = ReloadingContext(volume / tls.TLS_CERT, volume / tls.TLS_KEY, interval=0)
    client = client_for(volume / tls.CA_CERT)
    first = serial(handshake(holder.current(), client))

    tls.write_certificates(volume / "..v2", ca_dir=volume / "..v1")
    (volume / "..data_tmp").symlink_to("..v2")
    os.replace(volume / "..data_tmp", volume / "..data")
    second = serial(handshake(holder.current(), client))
    assert second != first and second == current_serial(volume)


def test_missing_files_keep_serving(cert_dir: Path) -> None:
    holder = ReloadingContext(cert_dir / tls.TLS_CERT, cert_dir / tls.TLS_KEY, interval=0)
    before = holder.current()
    (cert_dir / tls.TLS_CERT).unlink()
    assert holder.current() is before
