"""Run a command of ours as the chart runs it in a pod: in-cluster, with a service account as the kubelet
mounts it (a token and the API server's CA in a folder, its address in two variables).

The folder is put where the command reads it (webhook.kube.incluster.SERVICE_ACCOUNT_DIR) by a small
launcher, since a test cannot mount over /var/run/secrets; everything after that is the real command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from testkit.kubeapi import KubeAPIServer

# `python -c LAUNCHER FOLDER ARGV...`: `python -m webhook ARGV...` reading the service account in FOLDER.
LAUNCHER = (
    "import sys, runpy; from pathlib import Path; from webhook.kube import incluster; "
    "incluster.SERVICE_ACCOUNT_DIR = Path(sys.argv.pop(1)); runpy.run_module('webhook', run_name='__main__')"
)


def in_pod(
    api: KubeAPIServer, folder: Path, *argv: str, python_flags: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `priority-webhook ARGV` against `api` as a pod's container
    does; the service account is written into `folder`."""
    api.mount_service_account(folder)
    host, _, port = api.url.removeprefix("https://").rpartition(":")
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "PATH": "/usr/bin:/bin"}
    return [sys.executable, *python_flags, "-c", LAUNCHER, str(folder), *argv], env
