"""Helm pre-delete hook: remove the webhook configurations before the webhook itself goes away.

With the install gate they are hooks, which `helm uninstall` does not delete; removing them first also
means no pod creation is refused while the webhook's pods stop. The validating one goes first: a pod created
between the two deletions is still mutated, never refused for a priority nobody set. Usage: cleanup.py NAME
"""

import sys

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


def main(argv: list[str]) -> int:
    name = argv[1]
    config.load_incluster_config()
    api = client.AdmissionregistrationV1Api()
    for kind, delete in (
        ("validatingwebhookconfiguration", api.delete_validating_webhook_configuration),
        ("mutatingwebhookconfiguration", api.delete_mutating_webhook_configuration),
    ):
        try:
            delete(name)
            print(f"{kind} {name} deleted")
        except ApiException as err:
            if err.status != 404:
                print(f"{kind} {name}: HTTP {err.status} {err.reason}", file=sys.stderr)
                return 1
            print(f"{kind} {name} already gone")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
