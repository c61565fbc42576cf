"""The image under test: built by `scripts/image`, run by podman with the settings the chart renders.

`build()` runs the project's own build command and returns the image reference it prints last, with the
folder it wrote the SBOMs to.
`run_args()` turns a rendered pod spec and one of its containers into `podman run` options, the way the
kubelet would run it: user and groups, read-only root (and nothing else writable: podman's own tmpfs on
/tmp, /run and /var/tmp are turned off), capabilities, no-new-privileges, the memory limit, env (with
`fieldRef`s and `$(VAR)` expansion in args), and the pod's volumes (emptyDirs as podman mounts, the
service-account token as the folder the test gives).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]
# The other architecture scripts/image builds, run here under emulation.
EMULATED_ARCH = {"amd64": "arm64", "arm64": "amd64"}[HOST_ARCH]


class EngineUnavailable(RuntimeError):
    """No container engine here, and none could be installed: the image cannot be built or run."""


@dataclass(frozen=True)
class Built:
    """One run of `scripts/image`: the reference it printed last, and where it wrote its SBOMs."""

    reference: str
    out_dir: Path

    def sbom_path(self, arch: str) -> Path:
        version = self.reference.rpartition(":")[2].removesuffix(f"-{arch}")
        return self.out_dir / f"priority-webhook-{version}-{arch}.cdx.json"

    def image_id(self, arch: str) -> str:
        """The ID of the image this run built for `arch`, as its SBOM records it (the tag may have moved
        since: another checkout's build)."""
        component = json.loads(self.sbom_path(arch).read_text())["metadata"]["component"]
        (found,) = [p["value"] for p in component["properties"] if p["name"] == "priority-webhook:image-id"]
        return str(found)


class ArchImage(NamedTuple):
    """One architecture's image of a build, by ID."""

    arch: str
    id: str
    built: Built

    @property
    def emulated(self) -> bool:
        return self.arch != HOST_ARCH


def build(*args: str, out_dir: Path, env: Mapping[str, str] = {}, timeout: float = 1800.0) -> Built:
    """Build with `scripts/image ARGS` (its SBOMs into `out_dir`) and return what it printed last; its
    output goes to the failure message. EngineUnavailable when there is no podman and it cannot be
    installed here."""
    can_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
    if shutil.which("podman") is None and not can_install:
        raise EngineUnavailable("podman is not installed, and only root with apt-get can install it")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "image"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
        env={**os.environ, "OUT_DIR": str(out_dir), **env},
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        if shutil.which("podman") is None:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise EngineUnavailable(f"podman could not be installed: {last}")
        raise AssertionError(
            f"scripts/image {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    return Built(lines[-1], out_dir)


def podman(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def inspect(reference: str, kind: str = "image") -> dict[str, Any]:
    return json.loads(podman(kind, "inspect", reference).stdout)[0]


def _memory(quantity: str) -> str:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", quantity)
    assert match, f"memory limit {quantity!r} not understood here"
    unit = {"Ki": "k", "Mi": "m", "Gi": "g", None: "b"}[match.group(2)]
    return match.group(1) + unit


def _size(quantity: str) -> str:
    return _memory(quantity).replace("b", "")


def security_args(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """The pod's and container's securityContext (the container's fields win), as the kubelet applies it."""
    context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    known = {
        "runAsNonRoot",
        "runAsUser",
        "runAsGroup",
        "fsGroup",
        "seccompProfile",
        "allowPrivilegeEscalation",
        "privileged",
        "readOnlyRootFilesystem",
        "capabilities",
    }
    assert set(context) <= known, f"securityContext fields not translated here: {set(context) - known}"
    args = [f"--user={context['runAsUser']}:{context['runAsGroup']}"]
    if context.get("runAsNonRoot"):
        assert context["runAsUser"] != 0, "runAsNonRoot with uid 0: the kubelet would refuse to start it"
    if "fsGroup" in context:
        args.append(f"--group-add={context['fsGroup']}")
    assert context.get("seccompProfile", {}).get("type", "RuntimeDefault") == "RuntimeDefault"
    if context.get("privileged"):
        args.append("--privileged")
    if context.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    capabilities = context.get("capabilities", {})
    args += [f"--cap-drop={cap}" for cap in capabilities.get("drop", [])]
    args += [f"--cap-add={cap}" for cap in capabilities.get("add", [])]
    if context.get("allowPrivilegeEscalation") is False:
        args.append("--security-opt=no-new-privileges")
    return args


def expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion in args; `$$(VAR)` stays literal."""
    return re.sub(
        r"\$\$|\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)) if m.group(1) else "$", value
    )


@dataclass
class Pod:
    """What the test gives the pod that the kubelet would: a node name and the service-account folder."""

    node_name: str
    service_account: Path | None
    workdir: Path


def run_args(
    pod_spec: Mapping[str, Any],
    container: Mapping[str, Any],
    pod: Pod,
    *,
    extra_env: Mapping[str, str] = {},
    extra_args: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """(`podman run` options, container args) for one rendered container."""
    options = ["--network=host", *security_args(pod_spec, container)]
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        options.append(f"--memory={_memory(limit)}")
    if "terminationGracePeriodSeconds" in pod_spec:
        options.append(f"--stop-timeout={pod_spec['terminationGracePeriodSeconds']}")
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
        else:
            field = item["valueFrom"]["fieldRef"]["fieldPath"]
            assert field == "spec.nodeName", f"env from {field} not translated here"
            env[item["name"]] = pod.node_name
    env.update(extra_env)
    options += [f"--env={name}={value}" for name, value in env.items()]
    volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            empty = volume["emptyDir"]
            if empty.get("medium") == "Memory":
                size = f",size={_size(empty['sizeLimit'])}" if "sizeLimit" in empty else ""
                options.append(f"--tmpfs={mount['mountPath']}:rw,mode=1777{size}")
            else:
                # A folder on the host, as the kubelet makes one (world-writable, here to be inspected).
                host = pod.workdir / "volumes" / mount["name"]
                host.mkdir(parents=True, exist_ok=True)
                host.chmod(0o1777)
                options.append(f"--volume={host}:{mount['mountPath']}:rw")
        else:
            raise AssertionError(f"volume {volume} not translated here")
    if pod_spec.get("automountServiceAccountToken", True) and pod.service_account is not None:
        options.append(f"--volume={pod.service_account}:{SERVICE_ACCOUNT_DIR}:ro")
    args = [expand(arg, env) for arg in container.get("args", [])] + list(extra_args)
    return options, args


def service_account(folder: Path, *, token: str, ca: bytes, namespace: str) -> Path:
    """The folder the kubelet projects into every pod that mounts a token, readable by any user."""
    folder.mkdir(parents=True)
    for name, content in (("token", token.encode()), ("ca.crt", ca), ("namespace", namespace.encode())):
        (folder / name).write_bytes(content)
        (folder / name).chmod(0o644)
    folder.chmod(0o755)
    return folder


class Container:
    """One detached container; removed by `remove()` (the fixtures call it whatever happens)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def start(cls, image: str, name: str, options: Sequence[str], args: Sequence[str]) -> Container:
        podman("run", "--detach", f"--name={name}", *options, image, *args)
        return cls(name)

    def state(self) -> dict[str, Any]:
        return inspect(self.name, "container")["State"]

    def running(self) -> bool:
        return bool(self.state()["Running"])

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def diff(self) -> list[str]:
        """Paths changed in the container's own filesystem, less those the engine made: its mount points
        (and the folders above them) and the files it manages (/etc/hosts, /etc/resolv.conf, ...)."""
        info = inspect(self.name, "container")
        engine_made = [m["Destination"] for m in info.get("Mounts", [])]
        engine_made += ["/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv"]
        engine_made += [path.partition(":")[0] for path in info["HostConfig"].get("Tmpfs", {}) or {}]
        # /var/run is a link to /run in the image: a mount under it is made under /run.
        engine_made += [
            "/run/" + made.removeprefix("/var/run/") for made in engine_made if made.startswith("/var/run/")
        ]
        changed = []
        for line in podman("diff", self.name).stdout.splitlines():
            _, _, path = line.strip().partition(" ")
            if path and not any(
                made == path or made.startswith(path.rstrip("/") + "/") for made in engine_made
            ):
                changed.append(line.strip())
        return changed

    def terminate(self, deadline: float) -> tuple[int, float]:
        """SIGTERM, as the kubelet sends it; (exit code, seconds to exit). Killed after `deadline`."""
        started = time.monotonic()
        podman("kill", "--signal=TERM", self.name)
        done = podman("wait", self.name, timeout=deadline + 10, check=False)
        elapsed = time.monotonic() - started
        if self.running():
            podman("kill", self.name, check=False)
            raise AssertionError(f"still running {elapsed:.1f}s after SIGTERM:\n{self.logs()[-3000:]}")
        return int(done.stdout.strip().splitlines()[-1]), elapsed

    def remove(self) -> None:
        podman("rm", "--force", "--time=0", self.name, check=False)
