"""The `kubernetes` client configuration: kubeconfig file, in-cluster service account, or the default rules.

Authentication (bearer tokens, exec/refresh hooks, client certificates, the cluster CA) lives in the
client's `Configuration`; the reflector reads it from there and never logs it.
"""

from __future__ import annotations

import os

import kubernetes.client
import kubernetes.config
import yaml
from kubernetes.config.config_exception import ConfigException

from webhook.kube import ConfigError

DEFAULT_KUBECONFIG = "~/.kube/config"


def kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    """The files kubectl would read: the given one, else each of `$KUBECONFIG`, else ~/.kube/config."""
    if kubeconfig:
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p]
    return paths or [os.path.expanduser(DEFAULT_KUBECONFIG)]


def api_client(
    kubeconfig: str | None, in_cluster: bool, context: str | None = None
) -> kubernetes.client.ApiClient:
    """A client for the cluster: `in_cluster` uses the pod's service account, else the kubeconfig file
    (None: `$KUBECONFIG` or `~/.kube/config`, as kubectl) and its `context` (None: the current one).
    A bad or missing configuration is a ConfigError."""
    configuration = kubernetes.client.Configuration()
    if not in_cluster:
        paths = kubeconfig_paths(kubeconfig)
        if not any(os.path.exists(p) for p in paths):
            raise ConfigError(f"kubeconfig {', '.join(paths)}: not found")
    try:
        if in_cluster:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        else:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as err:
        source = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{source}: {detail}") from err
    return kubernetes.client.ApiClient(configuration)
