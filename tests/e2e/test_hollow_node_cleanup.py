"""A real kubelet (kubemark's hollow node) leaves the machine's iptables as it found them: every kubelet makes
`KUBE-IPTABLES-HINT`, `KUBE-KUBELET-CANARY` and `KUBE-FIREWALL` (iptables and ip6tables) and never removes
them; the harness undoes them when the last hollow kubelet stops (testkit/hollow_node.py). Run with no other
kubelet on the machine (as CI runs it): another one's chains would already be there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testkit import node_host
from testkit.wait import wait_for
from tests.e2e.hollow import start_kubelet_env

KUBELET_CHAINS = ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL")


def kubelet_chains() -> set[str]:
    return {
        chain for name in KUBELET_CHAINS for chain in node_host.IptablesSnapshot.take().chains_named(name)
    }


@pytest.mark.skipif(shutil.which("iptables-save") is None, reason="no iptables on this machine")
def test_the_hollow_kubelets_chains_are_gone_once_it_stops(tmp_path: Path) -> None:
    before = node_host.IptablesSnapshot.take()
    found_before = kubelet_chains()
    with start_kubelet_env(tmp_path, "1.33") as env:
        # The kubelet makes its chains at start (its canary, in each table it watches, proves it got that far).
        wait_for(
            lambda: {c for c in kubelet_chains() if "KUBE-KUBELET-CANARY" in c} - found_before,
            timeout=60,
            interval=0.2,
            what="the kubelet's canary chains",
        )
        assert env.node.running()
    assert kubelet_chains() == found_before
    assert before.differences() == {}
