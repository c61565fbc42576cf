"""How the project reaches a cluster: the pod's service account, or a kubeconfig file (the default rules).

In a pod (`--in-cluster`, what the chart runs) the service account is read by webhook.kube.incluster and
the official client is never loaded. A kubeconfig goes through the client's own loader, imported only
then: its authentication (bearer tokens, exec and refresh hooks, client certificates, the cluster CA,
proxies) lives in the client's `Configuration`. Neither is ever logged.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from webhook.kube import ConfigError
from webhook.kube.incluster import ServiceAccount

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from webhook.kube.rest import Client

DEFAULT_KUBECONFIG = "~/.kube/config"


def kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    """The files kubectl would read: the given one, else each of `$KUBECONFIG`, else ~/.kube/config."""
    if kubeconfig:
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p]
    return paths or [os.path.expanduser(DEFAULT_KUBECONFIG)]


def api_client(kubeconfig: str | None, in_cluster: bool, context: str | None = None) -> Client:
    """A client for the cluster: `in_cluster` uses the pod's service account, else the kubeconfig file
    (None: `$KUBECONFIG` or `~/.kube/config`, as kubectl) and its `context` (None: the current one).
    A bad or missing configuration is a ConfigError."""
    if in_cluster:
        return ServiceAccount.from_environment()
    paths = kubeconfig_paths(kubeconfig)
    if not any(os.path.exists(p) for p in paths):
        raise ConfigError(f"kubeconfig {', '.join(paths)}: not found")
    return kubeconfig_client(kubeconfig, context)


def kubeconfig_client(kubeconfig: str | None, context: str | None) -> ApiClient:
    """The official client's `ApiClient` for a kubeconfig, by the client's own loader (imported here)."""
    import kubernetes.client
    import kubernetes.config
    import yaml
    from kubernetes.config.config_exception import ConfigException

    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"kubeconfig {kubeconfig or '(default)'}: {detail}") from err
    return kubernetes.client.ApiClient(configuration)
