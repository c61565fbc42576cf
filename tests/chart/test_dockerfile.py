"""The Dockerfile, checked statically (no container engine runs here): stages, user, entrypoint, contents."""

from __future__ import annotations

import configparser
import fnmatch
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from dockerfile_parse import DockerfileParser

from testkit import constraints

ROOT = Path(__file__).resolve().parents[2]
BUILD_TOOLS = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf|gcc|g\+\+|make|build-essential|cargo|rustc|curl|wget)\b"
)
SECRET_NAMES = re.compile(r"(PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY|PRIVATE)", re.IGNORECASE)


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    assert parser.structure, "Dockerfile parses to instructions"
    return parser


def stages(parser: DockerfileParser) -> list[list[dict[str, Any]]]:
    """Instructions grouped by stage (a FROM starts one); comments dropped."""
    grouped: list[list[dict[str, Any]]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            grouped.append([])
        if grouped and instruction["instruction"] != "COMMENT":
            grouped[-1].append(instruction)
    return grouped


def of(stage: list[dict[str, Any]], name: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def test_two_stages_on_a_slim_python_3_11_base(dockerfile: DockerfileParser) -> None:
    builder, runtime = stages(dockerfile)
    assert builder[0]["value"].endswith(" AS builder") and runtime[0]["value"].endswith(" AS runtime")
    assert dockerfile.parent_images == ["python:3.11-slim-bookworm"] * 2
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", dockerfile.baseimage)


def test_runtime_runs_as_a_numeric_non_root_user(dockerfile: DockerfileParser) -> None:
    runtime = stages(dockerfile)[-1]
    users = of(runtime, "USER")
    assert users, "the final stage sets a user"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit() and int(gid) > 0
    assert runtime.index(next(i for i in runtime if i["instruction"] == "USER")) > max(
        runtime.index(i) for i in runtime if i["instruction"] in ("RUN", "COPY")
    ), "everything is installed before the switch, root-owned and so read-only to the runtime user"


def test_runtime_user_matches_the_chart(dockerfile: DockerfileParser) -> None:
    import yaml

    values = yaml.safe_load((ROOT / "charts" / "priority-webhook" / "values.yaml").read_text())
    uid, _, gid = of(stages(dockerfile)[-1], "USER")[-1].partition(":")
    assert values["podSecurityContext"]["runAsUser"] == int(uid)
    assert values["podSecurityContext"]["runAsGroup"] == int(gid)


def test_entrypoint_is_the_command_in_exec_form(dockerfile: DockerfileParser) -> None:
    runtime = stages(dockerfile)[-1]
    assert json.loads(of(runtime, "ENTRYPOINT")[-1]) == ["priority-webhook"]
    setup = setup_cfg()
    scripts = setup["options.entry_points"]["console_scripts"]
    assert re.search(r"^\s*priority-webhook\s*=", scripts, re.MULTILINE), "the console script exists"
    env = " ".join(of(runtime, "ENV"))
    venv = re.search(r"PATH=(\S+)/bin:", env)
    assert venv, "the virtual environment's bin is on PATH"
    assert any(value.split()[-1] == venv.group(1) for value in of(runtime, "COPY"))


def test_runtime_copies_only_the_environment_and_installs_nothing(dockerfile: DockerfileParser) -> None:
    runtime = stages(dockerfile)[-1]
    assert of(runtime, "ADD") == []
    copies = [shlex.split(value) for value in of(runtime, "COPY")]
    assert copies and all(
        c[0] == "--from=builder" and c[1] == c[2] == "/opt/priority-webhook" for c in copies
    )
    assert of(runtime, "RUN") == [], "the base is left as it is: a later layer cannot make it smaller"


def pip_commands(stage: list[dict[str, Any]]) -> list[str]:
    """Each `pip ...` command of a stage's RUN instructions (split on `&&`)."""
    return [
        part.strip()
        for value in of(stage, "RUN")
        for part in value.split("&&")
        if re.search(r"-m pip\b", part)
    ]


def test_dependencies_come_from_setup_cfg(dockerfile: DockerfileParser) -> None:
    builder = stages(dockerfile)[0]
    text = " ".join(of(builder, "RUN"))
    assert "pip wheel --no-deps" in text and ".whl" in text, "the project is built as a wheel and installed"
    installs = [c for c in pip_commands(builder) if re.search(r"\binstall\b", c) and "uninstall" not in c]
    assert installs and all("--only-binary=:all:" in c or "--no-index" in c for c in installs), (
        "no dependency is compiled"
    )
    requirements = setup_cfg()["options"]["install_requires"].splitlines()
    names = {re.split(r"[<>=!~\[; ]", req.strip())[0].lower() for req in requirements if req.strip()}
    assert names
    mentioned = {
        name for name in names for c in installs if re.search(rf"\b{re.escape(name)}\b", c, re.IGNORECASE)
    }
    assert not mentioned, f"dependencies listed in the Dockerfile instead of setup.cfg: {mentioned}"
    assert not BUILD_TOOLS.search(text)


def pinned() -> dict[str, str]:
    return {name: pin.version for name, pin in constraints.pins().items()}


def test_every_install_is_pinned_build_tools_included(dockerfile: DockerfileParser) -> None:
    """Two builds of one commit install the same versions: every pip install that may resolve names is
    constrained, the wheel is built without build isolation (so with the pinned tools, not whatever an
    isolated build environment would fetch), and those tools are in constraints.txt."""
    builder = stages(dockerfile)[0]
    for command in pip_commands(builder):
        if re.search(r"\binstall\b", command) and "uninstall" not in command:
            assert "-c constraints.txt" in command or "--no-deps" in command, command
        if re.search(r"\bwheel\b.*--wheel-dir", command):
            assert "--no-build-isolation" in command and "--no-deps" in command, command
    import tomllib

    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    tools = {re.split(r"[<>=!~\[; ]", req)[0].lower() for req in build_requires} | {"pip"}
    assert tools <= set(pinned()), tools - set(pinned())
    tool_install = next(c for c in pip_commands(builder) if "setuptools" in c)
    assert set(tool_install.split()) >= tools | {"-c", "constraints.txt"}, tool_install


def test_build_configuration_comes_only_as_secret_mounts(dockerfile: DockerfileParser) -> None:
    """pip's configuration and the CA reach the steps that download, as build secrets (never a layer)."""
    builder = stages(dockerfile)[0]
    downloads = [
        value
        for value in of(builder, "RUN")
        if re.search(r"\binstall\b", value) and "--no-index" not in value
    ]
    assert downloads
    for value in downloads:
        assert "--mount=type=secret,id=pip.conf" in value and "--mount=type=secret,id=ca.crt" in value
    env = " ".join(of(builder, "ENV"))
    assert "PIP_CONFIG_FILE=/run/secrets/pip.conf" in env
    for instruction in dockerfile.structure:
        if instruction["instruction"] in ("COPY", "ADD"):
            assert not re.search(r"pip\.conf|\.crt\b|secret", instruction["value"]), instruction["value"]


def test_labels_name_the_version_revision_and_source(dockerfile: DockerfileParser) -> None:
    runtime = stages(dockerfile)[-1]
    labels = " ".join(of(runtime, "LABEL"))
    for key, arg in (("version", "VERSION"), ("revision", "REVISION"), ("source", "SOURCE")):
        assert f'org.opencontainers.image.{key}="${{{arg}}}"' in labels, key
        assert any(value.startswith(f"{arg}=") for value in of(runtime, "ARG")), arg
    chart = (ROOT / "charts" / "priority-webhook" / "Chart.yaml").read_text()
    source = next(value for value in of(runtime, "ARG") if value.startswith("SOURCE="))
    assert f"home: {source.partition('=')[2]}" in chart, "the default source is the chart's home"


def test_no_healthcheck_and_the_reason_is_given(dockerfile: DockerfileParser) -> None:
    assert not [i for i in dockerfile.structure if i["instruction"] == "HEALTHCHECK"]
    assert re.search(r"No HEALTHCHECK: Kubernetes", (ROOT / "Dockerfile").read_text())


def test_the_builder_copies_everything_the_wheel_needs(dockerfile: DockerfileParser) -> None:
    builder = stages(dockerfile)[0]
    copied = {src for value in of(builder, "COPY") for src in shlex.split(value)[:-1]}
    setup = setup_cfg()
    needed = {"pyproject.toml", "setup.cfg"}
    needed |= {
        ref.strip() for ref in re.findall(r"file:\s*(\S+)", setup["metadata"].get("long_description", ""))
    }
    needed |= {
        pkg.split(".")[0] for pkg in setup["options.packages.find"]["include"].replace(",", " ").split()
    }
    assert needed <= copied, needed - copied
    for src in copied:
        assert (ROOT / src).exists(), src


def test_no_secrets_in_the_image_definition(dockerfile: DockerfileParser) -> None:
    for instruction in dockerfile.structure:
        if instruction["instruction"] in ("ENV", "ARG"):
            # Names only: PIP_CONFIG_FILE's value is the secret mount's path, which holds nothing after the build.
            names = [item.partition("=")[0] for item in shlex.split(instruction["value"])]
            assert not [name for name in names if SECRET_NAMES.search(name)], instruction["value"]
        if instruction["instruction"] == "LABEL":
            assert not SECRET_NAMES.search(instruction["value"]), instruction["value"]
        if instruction["instruction"] in ("COPY", "ADD"):
            assert not re.search(r"\bcerts\b|\.key\b|\.pem\b|\.kube", instruction["value"]), instruction[
                "value"
            ]


def dockerignore_allows(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; a directory pattern covers its files."""
    allowed = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        glob = body.replace("**/", "*")
        if any(fnmatch.fnmatch(prefix, glob) for prefix in prefixes) or fnmatch.fnmatch(path, glob):
            allowed = negate
    return allowed


def test_dockerignore_admits_only_the_build_inputs(dockerfile: DockerfileParser) -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*", "an allow-list: everything is excluded first"
    copied = {src for value in of(stages(dockerfile)[0], "COPY") for src in shlex.split(value)[:-1]}
    for src in copied:
        assert dockerignore_allows(patterns, src), src
    assert dockerignore_allows(patterns, "webhook/cli.py")
    for path in (
        ".venv/bin/python",
        "certs/tls.key",
        ".git/config",
        "tests/chart/test_dockerfile.py",
        "webhook/__pycache__/cli.cpython-311.pyc",
        "charts/priority-webhook/values.yaml",
    ):
        assert not dockerignore_allows(patterns, path), path
