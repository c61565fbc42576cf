"""Helm hook: wait until the webhook answers /readyz through its Service, verifying its certificate.

Runs before Helm creates the webhook configurations (they are later hooks): if the webhook never becomes
ready, the install fails with no configuration in place, so no pod creation is ever refused for it.
Usage: wait_ready.py URL CA_FILE TIMEOUT_SECONDS
"""

import ssl
import sys
import time
import urllib.request


def wait_ready(url: str, ca_file: str, timeout: float, interval: float = 2.0) -> tuple[bool, str]:
    context = ssl.create_default_context(cafile=ca_file)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as response:
                if response.status == 200:
                    return True, f"{url}: ready"
                last = f"HTTP {response.status}"
        except Exception as err:  # refused, not resolvable yet, TLS not trusted, 503 while syncing
            last = " ".join(str(err).split())[:300]
        if time.monotonic() + interval > deadline:
            return False, f"{url} not ready within {timeout:.0f}s: {last}"
        time.sleep(interval)  # polling a remote service; nothing to wait on locally


def main(argv: list[str]) -> int:
    url, ca_file, timeout = argv[1], argv[2], float(argv[3])
    ok, message = wait_ready(url, ca_file, timeout)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
