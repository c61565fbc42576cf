"""Which upstream behaviour to follow, derived from the Kubernetes version at hand.

The kubelet and the scheduler changed between the versions users run (1.31 to 1.37): in-place resize
(`InPlacePodVerticalScaling`, on by default from 1.33) makes pods already on a node count by their status,
the `supplementalGroupsPolicy: Strict` admission check only rejects once the feature is beta (1.33), and
the kubelet's preemption counts what a victim frees with the sidecar formula only from 1.34
(`GetResourceRequestQuantity` built on `PodRequests`, kubernetes PR #132277). The pure functions take a
`Semantics` as plain data; the edges derive it from `status.nodeInfo.kubeletVersion` (the kubelet's
version) or the API server's `/version` (the scheduler's, as both are released together).

Versions are kept to the patch: upstream backports user-visible changes into patch releases (the
scheduler's taint reason changed in 1.34.2 and 1.35.0), so a gate names the first release of each minor
that has the change (`_since`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Version = tuple[int, int, int]

CURRENT_VERSION: Version = (1, 37, 0)
"""What an input without version information is taken as: the newest stable minor we follow (upstream
supports 1.35, 1.36 and 1.37)."""

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def _since(version: Version, *releases: Version) -> bool:
    """Whether `version` has a change first released in `releases` (one per minor that got it, the
    oldest minor first): from the oldest release on, and within a listed minor from its patch on."""
    if version < releases[0]:
        return False
    for release in releases:
        if release[:2] == version[:2]:
            return version >= release
    return True


@dataclass(frozen=True, slots=True)
class Semantics:
    """Feature switches of one Kubernetes minor version, with the gates at their default values."""

    version: Version = CURRENT_VERSION

    def __post_init__(self) -> None:
        # (1, 33) is 1.33.0: tests and callers may name a minor alone.
        full = (*self.version, 0, 0, 0)[:3]
        object.__setattr__(self, "version", full)

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
    def pod_level_status_resources(self) -> bool:
        """`InPlacePodLevelResourcesVerticalScaling` beta, on by default, in 1.36 (kubernetes PR #137684):
        the scheduler counts a pod on a node by its pod-level status too (`status.resources`,
        `status.allocatedResources`): pod-level requests as the largest of spec, running and allocated,
        and the containers' aggregate from the pod-level maps when the kubelet reports both."""
        return self.version >= (1, 36)

    @property
    def taint_reason_generic(self) -> bool:
        """TaintToleration's reason is `node(s) had untolerated taint(s)` from 1.34.2 (kubernetes PR
        #135023, a backport) and 1.35.0 (#134740); before, `node(s) had untolerated taint {key: value}`
        named the first such taint."""
        return _since(self.version, (1, 34, 2), (1, 35, 0))

    @property
    def label(self) -> str:
        return ".".join(str(part) for part in self.version)


CURRENT = Semantics()


def parse_version(text: Any) -> Version | None:
    """`v1.33.3`, `1.33.3-gke.100` -> (1, 33, 3); `v1.34.0-alpha.1` -> (1, 34, 0); a version without a
    patch (`1.34`) is its .0; None when it is no version."""
    if not isinstance(text, str):
        return None
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


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
