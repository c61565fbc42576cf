"""Which upstream behaviour to follow, derived from the Kubernetes version at hand.

The kubelet and the scheduler changed between the versions users run (1.31 to 1.35): in-place resize
(`InPlacePodVerticalScaling`, on by default from 1.33) makes pods already on a node count by their status,
the `supplementalGroupsPolicy: Strict` admission check only rejects once the feature is beta (1.33), and
the kubelet's preemption counts what a victim frees with the sidecar formula only from 1.34
(`GetResourceRequestQuantity` built on `PodRequests`, kubernetes PR #132277). The pure functions take a
`Semantics` as plain data; the edges derive it from `status.nodeInfo.kubeletVersion` (the kubelet's
version) or the API server's `/version` (the scheduler's, as both are released together).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CURRENT_VERSION = (1, 33)
"""What an input without version information is taken as: the version the project is tested on."""

_VERSION = re.compile(r"v?(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class Semantics:
    """Feature switches of one Kubernetes minor version, with the gates at their default values."""

    version: tuple[int, int] = CURRENT_VERSION

    @property
    def status_resources(self) -> bool:
        """`InPlacePodVerticalScaling` on (beta, default on, 1.33): a pod on a node counts by its status
        too (`PodResourcesOptions.UseStatusResources`), and the kubelet admits against allocated pods."""
        return self.version >= (1, 33)

    @property
    def supplemental_groups_policy_check(self) -> bool:
        """`SupplementalGroupsPolicy` beta or above (1.33): the kubelet rejects `Strict` on a node that
        does not report the feature (`rejectPodAdmissionBasedOnSupplementalGroupsPolicy`)."""
        return self.version >= (1, 33)

    @property
    def victim_requests_pod_requests(self) -> bool:
        """The kubelet's `GetResourceRequestQuantity` (what a preemption victim frees) is built on
        `PodRequests` (KEP-753 sidecar formula, pod-level resources) from 1.34; before, it sums the
        containers and takes the largest single init container, sidecars included."""
        return self.version >= (1, 34)

    @property
    def oversize_unresolvable(self) -> bool:
        """NodeResourcesFit says UnschedulableAndUnresolvable for a request above the node's allocatable
        from 1.34 (kubernetes PR #131345): preemption is not tried there. Before, plain Unschedulable."""
        return self.version >= (1, 34)

    @property
    def label(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


CURRENT = Semantics()


def parse_version(text: Any) -> tuple[int, int] | None:
    """`v1.33.3`, `1.33.3-gke.100`, `v1.34.0-alpha.1` -> (1, 33); None when it is no version."""
    if not isinstance(text, str):
        return None
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def semantics_of(version: Any) -> Semantics:
    """The semantics of a version string; CURRENT when it is missing or unreadable."""
    parsed = parse_version(version)
    return CURRENT if parsed is None else Semantics(parsed)


def kubelet_version(node: Any) -> str | None:
    """`status.nodeInfo.kubeletVersion` of a Node object, None when absent."""
    if not isinstance(node, Mapping):
        return None
    status = node.get("status")
    info = status.get("nodeInfo") if isinstance(status, Mapping) else None
    version = info.get("kubeletVersion") if isinstance(info, Mapping) else None
    return version if isinstance(version, str) and version else None


def node_semantics(node: Any) -> Semantics:
    """The semantics of the kubelet running `node` (CURRENT when the Node does not say)."""
    return semantics_of(kubelet_version(node))
