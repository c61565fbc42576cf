"""The harness's own tests run the node's parts for real where they can be had: as root with apt-get, the
Debian packages they use (containerd, runc, the CNI plugins, iptables, podman, a C compiler with a static
libc) are installed where missing before the modules are collected, as the node suite installs them before
a node starts. So no test here skips for a tool that could be installed; only a machine that cannot host a
node at all (not Linux, not root, no cgroups, no apt-get) leaves the runtime tests out, each saying why."""

from __future__ import annotations

import shutil

from testkit import node_parts

if (
    node_parts.host_problem() is None
    and shutil.which("apt-get") is not None
    and node_parts.missing_packages()
):
    node_parts.install_missing()
