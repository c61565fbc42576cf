"""A real Kubernetes control plane for end-to-end tests, in the manner of controller-runtime's envtest.

The binaries come from an envtest folder (`kube-apiserver`, `kubectl`, `etcd`, and optionally
`kube-controller-manager`, `kube-scheduler` and `kubemark`), found as envtest finds it: the folder named by
`KUBEBUILDER_ASSETS`, else the newest patch of the wanted minor in setup-envtest's data folder
(`${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest/k8s/1.33.x-linux-amd64`, where `setup-envtest use 1.33.x`
puts it). etcd may also come from PATH (Debian's `etcd-server`). This repository ships no Kubernetes binary:
where no folder is found, `AssetsMissing` says where it looked. Everything else is made here, in a temporary folder: free loopback ports, certificates from
the project's own certificate code, an admin kubeconfig, and one log file per process.

    with ControlPlane.start(workdir, apiserver_args=["--disable-admission-plugins=Priority"]) as cp:
        cp.kubectl("get", "priorityclasses")

No process outlives the test run: every child is asked to receive SIGTERM when the test process dies
(`PR_SET_PDEATHSIG`), and `stop()` runs from the context manager, from `atexit` and on SIGTERM.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from testkit import live
from testkit.wait import wait_for
from webhook.files import tls

ASSETS_ENV = "KUBEBUILDER_ASSETS"
# The oldest Kubernetes we still prove, for the tests of behaviour that differs between versions.
OLDEST_ASSETS_ENV = "KUBEBUILDER_ASSETS_OLDEST"
# The minor version each variable stands for, when the folder is looked up in setup-envtest's data folder.
WANTED = {ASSETS_ENV: "1.33", OLDEST_ASSETS_ENV: "1.24"}
REQUIRED = ("kube-apiserver", "kubectl")
SERVICE_CIDR = "10.0.0.0/24"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class AssetsMissing(RuntimeError):
    """No envtest folder for the wanted version: the end-to-end tests cannot run. The message names the
    places looked at."""


def data_folder() -> Path:
    """Where `setup-envtest use` keeps its versions: `$XDG_DATA_HOME/kubebuilder-envtest/k8s`."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kubebuilder-envtest" / "k8s"


def shown(path: Path) -> str:
    """A path as a person reads it in a summary line: the home folder as `~`."""
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text


def _lacks(folder: Path) -> list[str]:
    """The binaries an envtest folder lacks (etcd may come from PATH: Debian's etcd-server)."""
    missing = [name for name in REQUIRED if not os.access(folder / name, os.X_OK)]
    if not os.access(folder / "etcd", os.X_OK) and not shutil.which("etcd"):
        missing.append("etcd (in the folder or on PATH)")
    return missing


def _patch_folders(minor: str) -> list[Path]:
    """setup-envtest's folders of `minor` for this machine (`1.33.3-linux-amd64`), newest patch first."""
    suffix = f"-linux-{_ARCH.get(os.uname().machine, os.uname().machine)}"
    pattern = re.compile(re.escape(minor) + r"\.(\d+)" + re.escape(suffix) + "$")
    try:
        entries = list(data_folder().iterdir())
    except OSError:
        return []
    found = [(int(m.group(1)), entry) for entry in entries if (m := pattern.match(entry.name))]
    return [entry for _, entry in sorted(found, key=lambda pair: pair[0], reverse=True)]


def assets_dir(env: str = ASSETS_ENV) -> Path:
    """The envtest folder of the version `env` stands for (the current one by default, `OLDEST_ASSETS_ENV`
    for the oldest), found the envtest way: the variable, else the newest complete patch of the wanted
    minor in setup-envtest's data folder. Raises AssetsMissing naming the places looked at."""
    value = os.environ.get(env, "")
    if value:
        folder = Path(value)
        missing = _lacks(folder)
        if missing:
            raise AssetsMissing(f"{env}={folder} lacks {', '.join(missing)}")
        return folder
    minor = WANTED[env]
    incomplete = []
    for folder in _patch_folders(minor):
        missing = _lacks(folder)
        if not missing:
            return folder
        incomplete.append(f"{folder.name} lacks {', '.join(missing)}")
    looked = f"none under {shown(data_folder())}" if not incomplete else "; ".join(incomplete)
    raise AssetsMissing(f"no envtest folder ({env} unset; {looked})")


def etcd_binary(folder: Path) -> str:
    """etcd from the envtest folder where it has one (setup-envtest's do), else from PATH."""
    own = folder / "etcd"
    return str(own) if os.access(own, os.X_OK) else shutil.which("etcd") or str(own)


def merged_flags(defaults: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """`defaults` with each `--name=value` of `overrides` in place of the default of that name, the rest
    appended: a caller's flag wins. kube-apiserver itself does not let a later flag win: it appends a
    repeated list flag (`--authorization-mode=RBAC --authorization-mode=Node,RBAC` is "RBAC, Node, RBAC",
    and it exits: "has mode specified more than once")."""

    def name(flag: str) -> str:
        return flag.split("=", 1)[0]

    given = {name(flag): flag for flag in overrides}
    kept = [given.pop(name(flag), flag) for flag in defaults]
    return kept + [flag for flag in overrides if given.get(name(flag)) == flag]


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all sockets held open together so none repeats)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _service_account_keys() -> tuple[bytes, bytes]:
    """The service-account token signer (ES256): private key PEM, public key PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM when the test process exits, however it exits."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    os.setsid()


@dataclass
class Process:
    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's (the kubelet's $TMPDIR)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                preexec_fn=_die_with_parent,
            )

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if not self.running():
            return
        assert self.popen is not None
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


@dataclass(eq=False)
class ControlPlane:
    """etcd + kube-apiserver (+ controller manager, scheduler) on loopback, and how to talk to them."""

    workdir: Path
    assets: Path
    url: str
    etcd_url: str
    kubeconfig: Path
    ca_file: Path
    ca: tls.KeyPair
    processes: dict[str, Process] = field(default_factory=dict)
    version: str = ""

    # -- lifecycle ---------------------------------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def start(cls, workdir: Path, **options: Any) -> Iterator[ControlPlane]:
        """`create` with the same options, stopped when the block ends."""
        plane = cls.create(workdir, **options)
        try:
            yield plane
        finally:
            plane.stop()

    @classmethod
    def create(
        cls,
        workdir: Path,
        *,
        apiserver_args: Sequence[str] = (),
        controller_manager: bool = False,
        scheduler: bool = False,
        timeout: float = 120.0,
        assets: Path | None = None,
        serving_hosts: Sequence[str] = (),
        secure_port: int | None = None,
    ) -> ControlPlane:
        """Start etcd and kube-apiserver (and the optional components) from `assets`, by default the current
        version's envtest folder (`assets_dir()`); pass `assets_dir(OLDEST_ASSETS_ENV)` for the oldest.
        `serving_hosts`: further names and addresses the API server's certificate holds (a node's pods reach
        it at the `kubernetes` Service's address and at the address it advertises). `secure_port`: the API
        server's port, where the caller needs it before the start (a firewall rule for it); else a free one."""
        assets = assets or assets_dir()
        workdir.mkdir(parents=True, exist_ok=True)
        pki = workdir / "pki"
        pki.mkdir(exist_ok=True)
        etcd_port, peer_port, api_port, cm_port, sched_port = free_ports(5)
        api_port = secure_port or api_port
        ca = tls.create_ca("envtest CA", days=3650)
        serving = tls.create_serving_cert(
            ca,
            [
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                *serving_hosts,
            ],
            days=30,
        )
        front_ca = tls.create_ca("envtest front-proxy CA", days=3650)
        files = {
            "ca.crt": ca.cert_pem(),
            "ca.key": ca.key_pem(),
            "apiserver.crt": serving.cert_pem(),
            "apiserver.key": serving.key_pem(),
            "front-proxy-ca.crt": front_ca.cert_pem(),
        }
        files["sa.key"], files["sa.pub"] = _service_account_keys()
        front_client = tls.create_client_cert(front_ca, "front-proxy-client", days=30)
        files["front-proxy-client.crt"], files["front-proxy-client.key"] = (
            front_client.cert_pem(),
            front_client.key_pem(),
        )
        for name, data in files.items():
            tls.write_file(pki / name, data, 0o600)
        url = f"https://127.0.0.1:{api_port}"
        plane = cls(
            workdir,
            assets,
            url,
            f"http://127.0.0.1:{etcd_port}",
            workdir / "admin.kubeconfig",
            pki / "ca.crt",
            ca,
        )
        plane.write_kubeconfig(plane.kubeconfig, "admin", ("system:masters",))
        live.track(plane, plane.stop)
        try:
            plane._add(
                "etcd",
                [
                    etcd_binary(assets),
                    "--name",
                    "default",
                    "--data-dir",
                    str(workdir / "etcd-data"),
                    "--listen-client-urls",
                    plane.etcd_url,
                    "--advertise-client-urls",
                    plane.etcd_url,
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-cluster",
                    f"default=http://127.0.0.1:{peer_port}",
                    "--initial-cluster-state",
                    "new",
                    "--log-level",
                    "warn",
                    "--logger",
                    "zap",
                ],
                lambda: plane._etcd_healthy(),
                timeout,
            )
            plane._add(
                "kube-apiserver",
                [
                    str(assets / "kube-apiserver"),
                    *merged_flags(
                        [
                            "--advertise-address=127.0.0.1",
                            "--bind-address=127.0.0.1",
                            f"--secure-port={api_port}",
                            f"--etcd-servers={plane.etcd_url}",
                            f"--cert-dir={workdir / 'apiserver-certs'}",
                            f"--tls-cert-file={pki / 'apiserver.crt'}",
                            f"--tls-private-key-file={pki / 'apiserver.key'}",
                            f"--client-ca-file={pki / 'ca.crt'}",
                            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                            f"--service-account-key-file={pki / 'sa.pub'}",
                            f"--service-account-signing-key-file={pki / 'sa.key'}",
                            f"--service-cluster-ip-range={SERVICE_CIDR}",
                            "--authorization-mode=RBAC",
                            "--allow-privileged=true",
                            "--endpoint-reconciler-type=none",
                            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                            "--requestheader-allowed-names=front-proxy-client",
                            "--requestheader-username-headers=X-Remote-User",
                            "--requestheader-group-headers=X-Remote-Group",
                            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                        ],
                        apiserver_args,
                    ),
                ],
                plane.ready,
                timeout,
            )
            plane.version = str(plane.get("/version").json()["gitVersion"])
            if controller_manager:
                plane._start_controller_manager(cm_port, timeout)
            if scheduler:
                plane._start_scheduler(sched_port, timeout)
        except BaseException:
            plane.stop()
            raise
        return plane

    @property
    def minor(self) -> tuple[int, int]:
        """(major, minor) of kube-apiserver's `gitVersion` ("v1.24.0-alpha.1-dirty" -> (1, 24)), for the
        expectations that differ between versions."""
        found = re.match(r"v(\d+)\.(\d+)", self.version)
        if not found:
            raise ValueError(f"kube-apiserver version {self.version!r} is not vMAJOR.MINOR...")
        return int(found.group(1)), int(found.group(2))

    def _add(self, name: str, args: list[str], ready: Any, timeout: float) -> None:
        process = Process(name, args, self.workdir / f"{name}.log")
        self.processes[name] = process
        process.start()
        self._wait_ready(process, ready, timeout)

    def _wait_ready(self, process: Process, ready: Any, timeout: float) -> None:
        def check() -> bool:
            if not process.running():
                raise RuntimeError(f"{process.name} exited while starting:\n{process.tail()}")
            return bool(ready())

        wait_for(check, timeout=timeout, interval=0.1, what=f"{process.name} to become ready")

    def _start_controller_manager(self, port: int, timeout: float) -> None:
        kubeconfig = self.workdir / "controller-manager.kubeconfig"
        self.write_kubeconfig(kubeconfig, "system:kube-controller-manager")
        pki = self.workdir / "pki"
        self._add(
            "kube-controller-manager",
            [
                str(self.assets / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'cm-certs'}",
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
            lambda: self._component_healthy(port),
            timeout,
        )
        # Pods can be created only once the service-account controller has made `default`.
        wait_for(
            lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200,
            timeout=timeout,
            interval=0.2,
            what="ServiceAccount default/default",
        )

    def _start_scheduler(self, port: int, timeout: float) -> None:
        kubeconfig = self.workdir / "scheduler.kubeconfig"
        self.write_kubeconfig(kubeconfig, "system:kube-scheduler")
        self._add(
            "kube-scheduler",
            [
                str(self.assets / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--leader-elect=false",
            ],
            lambda: self._component_healthy(port),
            timeout,
        )

    def stop(self) -> None:
        """Scheduler and controller manager first, then the API server, then etcd (as a cluster stops)."""
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            if name in self.processes:
                self.processes[name].stop()
        live.forget(self)

    def restart_apiserver(self, timeout: float = 120.0, *, stop_timeout: float = 15.0) -> None:
        """Stop kube-apiserver and start it again with the same flags, port and storage.

        `stop_timeout`: seconds before SIGTERM becomes SIGKILL. An open watch keeps this version from
        exiting until its own shutdown timeout, so a test with watching clients may want it short.
        """
        process = self.processes["kube-apiserver"]
        process.stop(stop_timeout)
        process.start()
        self._wait_ready(process, self.ready, timeout)

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- health ------------------------------------------------------------------------------------
    def _etcd_healthy(self) -> bool:
        try:
            return requests.get(self.etcd_url + "/health", timeout=2).json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def _component_healthy(self, port: int) -> bool:
        # The component's self-signed serving certificate is made at its start: nothing to verify it with.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            try:
                return requests.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=3).text == "ok"
            except requests.RequestException:
                return False

    def ready(self) -> bool:
        try:
            return self.get("/readyz").text == "ok"
        except requests.RequestException:
            return False

    # -- access ------------------------------------------------------------------------------------
    def session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False
        session.verify = str(self.ca_file)
        session.cert = (str(self.workdir / "pki" / "admin.crt"), str(self.workdir / "pki" / "admin.key"))
        return session

    def get(self, path: str) -> requests.Response:
        with self.session() as session:
            return session.get(self.url + path, timeout=5)

    def write_kubeconfig(
        self, path: Path, user: str, groups: tuple[str, ...] = (), *, token: str | None = None
    ) -> Path:
        """A kubeconfig for `user` (client certificate in `groups`), or for a bearer `token`."""
        credentials: dict[str, str]
        if token is not None:
            credentials = {"token": token}
        else:
            pair = tls.create_client_cert(self.ca, user, groups, days=30)
            stem = path.with_suffix("")
            if user == "admin":
                stem = self.workdir / "pki" / "admin"
            tls.write_file(stem.with_name(stem.name + ".crt"), pair.cert_pem(), 0o600)
            tls.write_file(stem.with_name(stem.name + ".key"), pair.key_pem(), 0o600)
            credentials = {
                "client-certificate-data": base64.b64encode(pair.cert_pem()).decode(),
                "client-key-data": base64.b64encode(pair.key_pem()).decode(),
            }
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca.cert_pem()).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
            "current-context": "envtest",
        }
        tls.write_file(path, yaml.safe_dump(config).encode(), 0o600)
        return path

    def service_account_kubeconfig(self, path: Path, namespace: str, name: str) -> Path:
        """A kubeconfig with a token of ServiceAccount NS/NAME (TokenRequest), so RBAC is the real one's."""
        self.kubectl("create", "serviceaccount", name, "-n", namespace, check=False)
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=3600s").stdout.strip()
        return self.write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}", token=token)

    def new_namespace(self, prefix: str) -> str:
        """A new namespace `prefix-<6 hex>`, once its `default` ServiceAccount exists (pods need it)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        wait_for(
            lambda: self.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
            timeout=60,
            interval=0.2,
            what=f"the default ServiceAccount in {name}",
        )
        return name

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this control plane; `check` raises with its stderr."""
        result = subprocess.run(
            [str(self.assets / "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}"
            )
        return result

    def apply(self, *objects: dict[str, Any], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """`kubectl apply -f -` of the objects (as a v1 List)."""
        return self.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
            **kwargs,
        )

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    # -- faults ------------------------------------------------------------------------------------
    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, so older resourceVersions get a real `410 Gone`."""
        key = base64.b64encode(secrets.token_hex(4).encode()).decode()
        header = requests.post(self.etcd_url + "/v3/kv/range", json={"key": key}, timeout=5).json()["header"]
        revision = int(header["revision"])
        requests.post(
            self.etcd_url + "/v3/kv/compaction", json={"revision": revision, "physical": True}, timeout=30
        ).raise_for_status()
        return revision

    def logs(self, lines: int = 40) -> str:
        return "\n".join(f"--- {name} ({p.log})\n{p.tail(lines)}" for name, p in self.processes.items())

    def remove_workdir(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def wait_deleted(plane: ControlPlane, *args: str, timeout: float = 60.0) -> None:
    """Wait until `kubectl get ARGS` answers NotFound."""
    wait_for(
        lambda: "NotFound" in plane.kubectl("get", *args, check=False).stderr,
        timeout=timeout,
        interval=0.2,
        what=f"{' '.join(args)} to be deleted",
    )
