"""The image's figures: size, build time, a worker's memory at rest, start-up to Ready.

    .venv/bin/python benchmarks/image.py [--builds] [--rounds 3]

- size: unpacked (what podman stores) and compressed (gzip layers, what a registry stores and a node
  pulls), each against the base image's in the same run;
- build time (with --builds): `scripts/image` from a copy of the build inputs, cold (NO_CACHE=1: every
  step again, the base already present) and after a change to one source file (dependencies cached);
- the webhook container run as the chart's Deployment runs it (testkit/image_engine.py) against the test API
  server: seconds from `podman run` to /readyz 200, against `podman run IMAGE --version` (the engine's
  and the interpreter's own start) in the same run; then, after 5 s at rest, each gunicorn worker's RSS
  and PSS, against a bare interpreter and one that imported the `kubernetes` client, in the same image.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import secrets
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import helm_python as helm  # noqa: E402
import urllib3  # noqa: E402

from testkit.chart_rendering import CHART, FULLNAME, NAMESPACE, render  # noqa: E402
from testkit.image_engine import Container, Pod, inspect, podman, run_args, service_account  # noqa: E402
from testkit.kubeapi import ROTATION_RESOURCES, KubeAPIServer  # noqa: E402
from testkit.processes import tree  # noqa: E402
from testkit.server import free_port  # noqa: E402
from testkit.wait import wait_for  # noqa: E402

MIB = 1024 * 1024
BUILD_INPUTS = (
    "Dockerfile",
    ".dockerignore",
    "pyproject.toml",
    "setup.cfg",
    "README.md",
    "LICENSE",
    "constraints.txt",
    "webhook",
    "scripts/image",
    "scripts/sbom.py",
)


def image_ref() -> str:
    done = subprocess.run(["bash", "scripts/image"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def compressed_size(reference: str) -> int:
    """Bytes of the image's layers as gzip blobs (a registry's and a pull's size)."""
    with tempfile.TemporaryDirectory() as folder:
        podman("save", "--format=docker-dir", "--compress", "-o", f"{folder}/image", reference, timeout=600)
        manifest = json.loads(Path(folder, "image", "manifest.json").read_text())
        return sum(layer["size"] for layer in manifest["layers"])


def base_of(reference: str) -> str:
    """The base the image was built on: the image whose top layer is the image's first."""
    layers = inspect(reference)["RootFS"]["Layers"]
    for line in podman("images", "--format={{.Repository}}:{{.Tag}}").stdout.splitlines():
        candidate = "priority-webhook-base" in line or line.startswith(
            ("docker.io/library/python:", "python:")
        )
        if (
            candidate
            and inspect(line)["RootFS"]["Layers"] == layers[: len(inspect(line)["RootFS"]["Layers"])]
        ):
            return line
    raise SystemExit(f"no base image of {reference} in storage")


def sizes(reference: str) -> None:
    base = base_of(reference)
    unpacked, base_unpacked = inspect(reference)["Size"], inspect(base)["Size"]
    packed, base_packed = compressed_size(reference), compressed_size(base)
    print(f"image {reference} on {base}")
    print(
        f"  unpacked   {unpacked / MIB:6.1f} MiB = base {base_unpacked / MIB:6.1f} MiB "
        f"+ {(unpacked - base_unpacked) / MIB:5.1f} MiB ({unpacked / base_unpacked:.2f}x the base)"
    )
    print(
        f"  compressed {packed / MIB:6.1f} MiB = base {base_packed / MIB:6.1f} MiB "
        f"+ {(packed - base_packed) / MIB:5.1f} MiB ({packed / base_packed:.2f}x the base)"
    )


def builds() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name in BUILD_INPUTS:
            source, target = ROOT / name, Path(folder, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)
        # One date for both builds, as for edits within one commit (the copy has no git to take it from).
        env = {**os.environ, "IMAGE": "localhost/priority-webhook-bench", "SOURCE_DATE_EPOCH": "1700000000"}

        def timed(**extra: str) -> float:
            start = time.perf_counter()
            subprocess.run(
                ["bash", "scripts/image"], cwd=folder, env={**env, **extra}, check=True, capture_output=True
            )
            return time.perf_counter() - start

        cold = timed(NO_CACHE="1")
        with open(Path(folder, "webhook", "__init__.py"), "a") as source:
            source.write(f"# benchmark {secrets.token_hex(4)}\n")
        warm = timed()
        print(
            f"build: cold (base present) {cold:.0f} s; after a source-only change {warm:.0f} s "
            f"({warm / cold:.2f}x)"
        )
        podman("rmi", "--force", "localhost/priority-webhook-bench:" + version(), check=False)


def version() -> str:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "--version"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()[-1]


def memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MiB of one host process."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0]) * 1024
    return fields["Rss"] / MIB, fields["Pss"] / MIB


def at_rest(reference: str, options: list[str], code: str) -> tuple[float, float]:
    """(RSS, PSS) MiB of `python -c code` resting in the image."""
    box = Container.start(
        reference,
        f"pw-bench-{secrets.token_hex(4)}",
        [*options, "--entrypoint=python"],
        ["-c", code + "\nimport time\nprint('ready', flush=True)\ntime.sleep(600)"],
    )
    try:
        wait_for(lambda: "ready" in box.logs(), timeout=60, what="python at rest")
        time.sleep(5)  # at rest: the figure is what stays after start-up
        return memory(int(box.state()["Pid"]))
    finally:
        box.remove()


def ready(api: KubeAPIServer, folder: Path, port: int) -> bool:
    """/readyz answers 200 over TLS verified with the CA the webhook published (once it has)."""
    secret = api.get("secrets", f"{FULLNAME}-webhook-ca", NAMESPACE)
    if not secret:
        return False
    (folder / "ca.crt").write_bytes(base64.b64decode(secret["data"]["ca-bundle.crt"]))
    name = f"{FULLNAME}.{NAMESPACE}.svc"
    context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    http = urllib3.PoolManager(ssl_context=context, server_hostname=name, assert_hostname=name, retries=False)
    try:
        return http.request("GET", f"https://127.0.0.1:{port}/readyz", timeout=1).status == 200
    except urllib3.exceptions.HTTPError:
        return False


def serve(reference: str, rounds: int) -> None:
    port = free_port()
    with helm.Chart.load(CHART) as chart:
        rendered = render(chart, {"webhook": {"port": port}})
    deployment = rendered.one("Deployment")["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    ready_times, bare_times, workers = [], [], []
    for _ in range(rounds):
        api = KubeAPIServer(tls=True, token=secrets.token_urlsafe(16), bookmark_interval=0.2)
        for resource in ROTATION_RESOURCES:
            api.register_resource(resource)
        with api, tempfile.TemporaryDirectory() as folder:
            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                api.create(kind.lower() + "s", rendered.one(kind))
            assert api.certificates is not None and api.token is not None
            account = service_account(
                Path(folder, "sa"), token=api.token, ca=api.certificates.ca.read_bytes(), namespace=NAMESPACE
            )
            host, _, api_port = api.url.removeprefix("https://").rpartition(":")
            options, args = run_args(
                deployment,
                container,
                Pod("node-a", account, Path(folder)),
                extra_env={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": api_port},
            )
            start = time.perf_counter()
            podman("run", "--rm", *options, reference, "--version")
            bare_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            box = Container.start(reference, f"pw-bench-{secrets.token_hex(4)}", options, args)
            try:
                wait_for(
                    functools.partial(ready, api, Path(folder), port),
                    timeout=120,
                    interval=0.05,
                    what="/readyz 200",
                )
                ready_times.append(time.perf_counter() - start)
                time.sleep(5)  # at rest
                master = int(box.state()["Pid"])
                workers += [memory(pid) for pid in tree(master)[1:]]
            finally:
                box.remove()
    bare = statistics.median(bare_times)
    ready_s = statistics.median(ready_times)
    print(
        f"serve: start to /readyz 200 {ready_s:.2f} s (median of {rounds}); `--version` in a container "
        f"{bare:.2f} s ({ready_s / bare:.1f}x)"
    )
    options, _ = run_args(deployment, container, Pod("node-a", None, Path(tempfile.mkdtemp())))
    python = at_rest(reference, options, "pass")
    client = at_rest(reference, options, "import kubernetes.client")
    rss = statistics.median(w[0] for w in workers)
    pss = statistics.median(w[1] for w in workers)
    print(
        f"worker at rest: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB (median of {len(workers)} workers); "
        f"bare python RSS {python[0]:.0f} MiB ({rss / python[0]:.1f}x); "
        f"python + kubernetes.client RSS {client[0]:.0f} MiB (the client: {client[0] - python[0]:.0f} MiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", action="store_true", help="also time a cold and a source-only build")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    reference = image_ref()
    sizes(reference)
    if args.builds:
        builds()
    serve(reference, args.rounds)


if __name__ == "__main__":
    main()
