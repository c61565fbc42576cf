"""Helm hook: wait until the webhook answers /readyz through its Service, verifying its certificate.

Runs before Helm creates the webhook configurations (they are later hooks): if the webhook never becomes
ready, the install fails with no configuration in place, so no pod creation is ever refused for it.
Usage: wait_ready.py URL CA_FILE TIMEOUT_SECONDS [ADDRESS_VARIABLE]

URL names the Service as the API server calls it (https://NAME.NAMESPACE.svc:443/readyz); its certificate is
checked against that name (SNI), with the CAs the webhook configurations trust. The connection goes to the
address in the environment variable ADDRESS_VARIABLE (the Service's cluster IP, which the kubelet gives every
pod of the namespace as NAME_SERVICE_HOST) when it is set, so no cluster DNS is needed; else to the name.
What cannot change by waiting (a certificate not trusted or not for the name, a name that does not resolve
with no address given) fails at once; anything else (refused, no answer, 503 while the cache syncs) is
tried again until the timeout. The cause is the last line of the log (the container's termination message).
"""

import http.client
import os
import socket
import ssl
import sys
import time
import urllib.parse


class Permanent(Exception):
    """A failure waiting cannot cure."""


class _Connection(http.client.HTTPSConnection):
    """Dials `address`, and checks the certificate against the URL's host name, as the API server does."""

    def __init__(self, host: str, port: int, address: str, context: ssl.SSLContext, timeout: float):
        super().__init__(host, port, context=context, timeout=timeout)
        self.address, self.tls = address, context

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        try:
            self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


def check(url: str, context: ssl.SSLContext, address: str | None) -> int:
    """One GET of URL: the HTTP status, or an exception (Permanent when waiting cannot help)."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    connection = _Connection(host, port, address or host, context, timeout=5)
    try:
        connection.request("GET", parts.path or "/")
        return connection.getresponse().status
    except ssl.SSLCertVerificationError as err:
        raise Permanent(f"the certificate is not trusted for {host}: {err.verify_message}") from None
    except socket.gaierror as err:
        if address is None:
            raise Permanent(f"cannot resolve {host} ({err.strerror}): no cluster DNS reachable from here") from None
        raise
    finally:
        connection.close()


def wait_ready(
    url: str, ca_file: str, timeout: float, interval: float = 2.0, address: str | None = None
) -> tuple[bool, str]:
    context = ssl.create_default_context(cafile=ca_file)
    through = f" (through {address})" if address else ""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            status = check(url, context, address)
            if status == 200:
                return True, f"{url}{through}: ready"
            last = f"HTTP {status}"
        except Permanent as err:
            return False, f"{url}{through}: {err}"
        except Exception as err:  # refused, reset, no answer yet: the webhook may still be starting
            last = " ".join(str(err).split())[:300] or type(err).__name__
        if time.monotonic() + interval > deadline:
            return False, f"{url}{through} not ready within {timeout:.0f}s: {last}"
        time.sleep(interval)  # polling a remote service; nothing to wait on locally


def main(argv: list[str]) -> int:
    url, ca_file, timeout = argv[1], argv[2], float(argv[3])
    address = (os.environ.get(argv[4]) or None) if len(argv) > 4 else None
    ok, message = wait_ready(url, ca_file, timeout, address=address)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
