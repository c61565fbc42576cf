"""The API server's version (`GET /version`): which upstream behaviour the cluster's scheduler follows.

kube-scheduler is released with the API server; the planner follows the server's minor version.
"""

from __future__ import annotations

from webhook.kube import rest

READ_TIMEOUT = 30.0


def server_version(client: rest.Client) -> str | None:
    """`gitVersion` (`v1.33.3`), or None when the server does not say (callers then use the current
    version); an unreachable server fails later, on the first real read, with its own message."""
    try:
        info = rest.call_json(client, "GET", "/version", timeout=READ_TIMEOUT)
    except rest.RestError:
        return None
    version = info.get("gitVersion") if isinstance(info, dict) else None
    return version if isinstance(version, str) else None
