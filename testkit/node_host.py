"""What a node changes on the machine, each change recorded so it can be undone: iptables rules, the bridge,
kernel settings, folders outside the run folder, mounts and cgroups.

iptables: `IptablesSnapshot.take()` saves both families first (iptables-save, ip6tables-save); `restore()`
removes what was added since by the node's programs, and only that: the chains the kubelet, kube-proxy and
the CNI plugins made (`KUBE-`, `CNI-`) and the node's own (`PW-NODE-`), every rule elsewhere that jumps to
them, and a table that did not exist before and is empty again (`nft delete table`, for iptables' nf_tables
flavour). Rules another program adds meanwhile (podman's network on a shared machine) are left alone, where
restoring the whole saved dump would delete them. After it, `iptables-save` prints what it printed before.

Paths: `PathSnapshot` records which of the machine-wide folders the kubelet, containerd and the CNI plugins
write whatever they are told (/var/lib/kubelet, /run/containerd, /run/netns, /var/lib/cni, /var/log/containers,
/var/log/pods; /opt/containerd, should a configuration leave containerd's `opt` plugin there) existed and what they held; cleanup unmounts and removes what is new, and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testkit.node_parts import nf_tables

OUR_CHAIN_PREFIX = "PW-NODE-"
NODE_CHAIN_PREFIXES = ("KUBE-", "CNI-", OUR_CHAIN_PREFIX)
FAMILIES = {"iptables": "ip", "ip6tables": "ip6"}  # command -> nft family
BUILTIN_CHAINS = {"INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING"}
# Folders the kubelet, containerd and CNI use whatever their configuration says.
MACHINE_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/run/containerd"),
    Path("/opt/containerd"),
    Path("/run/netns"),
    Path("/var/lib/cni"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
)
# Kernel settings the kubelet (without protectKernelDefaults), kube-proxy and the bridge plugin may write.
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"


def run(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), input=input, capture_output=True, text=True, check=False, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


# -- iptables ---------------------------------------------------------------------------------------------
@dataclass
class Table:
    chains: dict[str, str] = field(default_factory=dict)  # name -> policy ("-" for a user chain)
    rules: list[tuple[str, str]] = field(default_factory=list)  # (chain, the rest of the -A line)


def parse_save(text: str) -> dict[str, Table]:
    """iptables-save's output as tables of chains and rules (counters dropped)."""
    tables: dict[str, Table] = {}
    current: Table | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            current = tables.setdefault(line[1:], Table())
        elif current is None:
            continue
        elif line.startswith(":"):
            name, policy = line[1:].split()[:2]
            current.chains[name] = policy
        elif line.startswith("-A "):
            chain, _, rest = line[3:].partition(" ")
            current.rules.append((chain, re.sub(r"^\[\d+:\d+\] ", "", rest)))
    return tables


def normalized(text: str) -> str:
    """iptables-save's output without its comments and counters: what two dumps must agree on."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lines.append(re.sub(r"\[\d+:\d+\]", "[0:0]", line))
    return "\n".join(lines) + "\n"


def _target(rest: str) -> str | None:
    words = shlex.split(rest)
    for flag in ("-j", "-g", "--jump", "--goto"):
        if flag in words[:-1]:
            return words[words.index(flag) + 1]
    return None


def undo_script(before: dict[str, Table], now: dict[str, Table]) -> dict[str, str]:
    """Per table, an `iptables-restore --noflush` script that removes what the node's programs added since
    `before`: their new chains (flushed, then deleted) and every rule outside them that jumps to one."""
    scripts: dict[str, str] = {}
    for name, table in now.items():
        old = before.get(name, Table())
        new_chains = [
            chain
            for chain in table.chains
            if chain not in old.chains and chain.startswith(NODE_CHAIN_PREFIXES)
        ]
        ours = set(new_chains)
        lines: list[str] = []
        kept_old_rules = list(old.rules)
        for chain, rest in table.rules:
            if chain in ours:
                continue
            if (chain, rest) in kept_old_rules:
                kept_old_rules.remove((chain, rest))  # there before: one copy stays
                continue
            if _target(rest) in ours:
                lines.append(f"-D {chain} {rest}")
        lines += [f"-F {chain}" for chain in new_chains]
        lines += [f"-X {chain}" for chain in new_chains]
        if lines:
            scripts[name] = "\n".join([f"*{name}", *lines, "COMMIT"]) + "\n"
    return scripts


def empty_new_tables(before: dict[str, Table], now: dict[str, Table]) -> list[str]:
    """Tables that did not exist before and now hold nothing: builtin chains alone, policy ACCEPT, no rule."""
    return [
        name
        for name, table in now.items()
        if name not in before
        and not table.rules
        and all(chain in BUILTIN_CHAINS and policy == "ACCEPT" for chain, policy in table.chains.items())
    ]


@dataclass
class IptablesSnapshot:
    saved: dict[str, str]  # command -> iptables-save output

    @classmethod
    def take(cls) -> IptablesSnapshot:
        return cls({command: save(command) for command in FAMILIES if shutil.which(f"{command}-save")})

    def chains_named(self, prefix: str) -> list[str]:
        """`family table/chain` of every saved chain whose name starts with `prefix`."""
        return [
            f"{command} {table}/{chain}"
            for command, text in self.saved.items()
            for table, parsed in parse_save(text).items()
            for chain in parsed.chains
            if chain.startswith(prefix)
        ]

    def restore(self) -> None:
        """Undo what the node added (see the module's docstring); raises if a family then differs."""
        nft = shutil.which("nft") is not None and nf_tables()
        for command, text in self.saved.items():
            before = parse_save(text)
            now = parse_save(save(command))
            for script in undo_script(before, now).values():
                run(f"{command}-restore", "--noflush", input=script)
            if nft:
                for table in empty_new_tables(before, parse_save(save(command))):
                    run("nft", "delete", "table", FAMILIES[command], table, check=False)

    def differences(self, markers: Iterable[str] = ()) -> dict[str, list[str]]:
        """Per family, the lines (normalized) that appeared or went since the save and belong to the node:
        they name one of its chains' prefixes or one of `markers` (its bridge, its subnet). Other programs'
        rules, which may come and go meanwhile on a shared machine, are not the node's to answer for."""
        words = (*NODE_CHAIN_PREFIXES, *markers)
        found = {}
        for command, text in self.saved.items():
            before = set(normalized(text).splitlines())
            now = set(normalized(save(command)).splitlines())
            changed = sorted(line for line in before ^ now if any(word in line for word in words))
            if changed:
                found[command] = changed
        return found


def save(command: str) -> str:
    return run(f"{command}-save").stdout


@dataclass(frozen=True)
class Guard:
    """The node's own rules: nothing from the pod subnet is forwarded anywhere but back to the bridge (no
    pod reaches the outside network or the machine's resolver), and the API server's and kubelet's ports
    answer on loopback and the bridge only (the API server is bound on every address)."""

    bridge: str
    subnet: str
    ports: tuple[int, ...]

    def rules(self) -> dict[str, list[str]]:
        """Chain -> rules (iptables arguments after `-A CHAIN`)."""
        forward = OUR_CHAIN_PREFIX + "FORWARD"
        inbound = OUR_CHAIN_PREFIX + "INPUT"
        return {
            forward: [f"-s {self.subnet} ! -o {self.bridge} -j DROP"],
            inbound: [
                "-i lo -j RETURN",
                f"-i {self.bridge} -j RETURN",
                *[f"-p tcp -m tcp --dport {port} -j DROP" for port in self.ports],
            ],
        }

    def install(self) -> None:
        for chain, rules in self.rules().items():
            run("iptables", "-N", chain)
            for rule in rules:
                run("iptables", "-A", chain, *shlex.split(rule))
        run("iptables", "-I", "FORWARD", "1", "-j", OUR_CHAIN_PREFIX + "FORWARD")
        run("iptables", "-I", "INPUT", "1", "-j", OUR_CHAIN_PREFIX + "INPUT")


# -- kernel settings --------------------------------------------------------------------------------------
def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def set_sysctl(name: str, value: str) -> None:
    """Write a kernel setting where this kernel has it (record it in a SysctlSnapshot first)."""
    with contextlib.suppress(FileNotFoundError):
        _sysctl_path(name).write_text(value + "\n")


@dataclass
class SysctlSnapshot:
    values: dict[str, str]

    @classmethod
    def take(cls, names: Iterable[str] = SYSCTLS) -> SysctlSnapshot:
        values = {}
        for name in names:
            with contextlib.suppress(OSError):
                values[name] = _sysctl_path(name).read_text().strip()
        return cls(values)

    def restore(self) -> None:
        for name, value in self.values.items():
            path = _sysctl_path(name)
            with contextlib.suppress(OSError):
                if path.read_text().strip() != value:
                    path.write_text(value + "\n")

    def differences(self) -> dict[str, tuple[str, str]]:
        now = SysctlSnapshot.take(self.values)
        return {k: (v, now.values.get(k, "")) for k, v in self.values.items() if now.values.get(k) != v}


# -- the bridge -------------------------------------------------------------------------------------------
def links() -> list[str]:
    return [link["ifname"] for link in json.loads(run("ip", "-j", "link", "show").stdout)]


def machine_networks() -> list[str]:
    """Every IPv4 network this machine has an address or a route in (a new subnet must overlap none)."""
    found = [
        f"{info['local']}/{info['prefixlen']}"
        for link in json.loads(run("ip", "-j", "-4", "addr", "show").stdout)
        for info in link.get("addr_info", [])
    ]
    for route in json.loads(run("ip", "-j", "-4", "route", "show", "table", "all").stdout):
        dst = route.get("dst", "")
        if dst and dst != "default" and route.get("type", "unicast") in ("unicast", "local"):
            found.append(dst if "/" in dst else f"{dst}/32")
    return found


def create_bridge(name: str, address: str, prefixlen: int) -> None:
    """The bridge with its host address, up: made before the API server starts, so it can advertise an
    address pods reach (the CNI plugin finds it there and uses it)."""
    run("ip", "link", "add", name, "type", "bridge")
    run("ip", "addr", "add", f"{address}/{prefixlen}", "dev", name)
    run("ip", "link", "set", name, "up")


def delete_bridge(name: str) -> None:
    if name in links():
        run("ip", "link", "delete", name, check=False)


# -- mounts, paths, cgroups, processes ----------------------------------------------------------------------
def mounts_under(roots: Iterable[Path]) -> list[Path]:
    """Mount points at or under any of `roots`, deepest first (unmount in this order)."""
    prefixes = [str(root).rstrip("/") for root in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(roots: Iterable[Path]) -> None:
    roots = list(roots)
    for _ in range(3):  # a mount may hide another at the same point
        points = mounts_under(roots)
        if not points:
            return
        for point in points:
            if run("umount", str(point), check=False).returncode != 0:
                run("umount", "-l", str(point), check=False)


@dataclass
class PathSnapshot:
    """Which machine-wide folders existed and what they held, two levels deep (a containerd already on the
    machine has /run/containerd/runc and /run/containerd/s: the node's entries go one level below)."""

    entries: dict[Path, frozenset[str] | None]  # None: absent; else the relative paths at depth 1 and 2

    @classmethod
    def take(cls, paths: Iterable[Path] = MACHINE_PATHS) -> PathSnapshot:
        return cls({path: _two_levels(path) if path.is_dir() else None for path in paths})

    def new(self) -> list[Path]:
        """What the node made: a whole folder that was absent, else the entries it did not hold (an entry
        inside a new one goes with it)."""
        made = []
        for path, held in self.entries.items():
            if not path.exists():
                continue
            if held is None:
                made.append(path)
            elif path.is_dir():
                fresh = sorted(_two_levels(path) - held)
                made += [path / rel for rel in fresh if str(Path(rel).parent) not in fresh]
        return sorted(set(made))

    def clean(self) -> None:
        made = self.new()
        unmount_all(made)
        for path in made:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()


def _two_levels(path: Path) -> frozenset[str]:
    """The entries of a folder and of its sub-folders (not followed through links), as relative paths."""
    found = set()
    with contextlib.suppress(OSError):
        for name in os.listdir(path):
            found.add(name)
            inner = path / name
            if inner.is_dir() and not inner.is_symlink():
                with contextlib.suppress(OSError):
                    found.update(f"{name}/{child}" for child in os.listdir(inner))
    return frozenset(found)


def kubepods_cgroups() -> list[Path]:
    """The kubelet's pod cgroups in every hierarchy (v1: one per controller; v2: the unified one)."""
    found = []
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        candidate = CGROUP_ROOT / KUBEPODS
        return [candidate] if candidate.is_dir() else []
    for hierarchy in sorted(CGROUP_ROOT.iterdir()) if CGROUP_ROOT.is_dir() else []:
        candidate = hierarchy / KUBEPODS
        if not hierarchy.is_symlink() and candidate.is_dir():
            found.append(candidate)
    return found


def _walk_deepest_first(root: Path) -> Iterator[Path]:
    for folder, dirs, _ in os.walk(root, topdown=False):
        yield Path(folder)
        del dirs


def remove_cgroups(roots: Iterable[Path]) -> None:
    """Kill what is left in the node's pod cgroups (its containers: the pids listed there) and remove them,
    deepest first."""
    for root in roots:
        for group in _walk_deepest_first(root):
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        for group in _walk_deepest_first(root):
            with contextlib.suppress(OSError):
                group.rmdir()


def processes_naming(text: str, program: str) -> list[int]:
    """Pids of `program` (its file name) whose command line contains `text` (containerd's shims name the
    socket of their containerd)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            words = (entry / "cmdline").read_bytes().split(b"\0")
            if Path(words[0].decode(errors="replace")).name == program and text.encode() in b" ".join(words):
                pids.append(int(entry.name))
    return pids


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
