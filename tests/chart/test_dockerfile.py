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
    for command in of(runtime, "RUN"):
        assert not BUILD_TOOLS.search(command), command
        assert "uninstall" in command, "the only change to the base is removing its installer"


def test_dependencies_come_from_setup_cfg(dockerfile: DockerfileParser) -> None:
    builder = stages(dockerfile)[0]
    text = " ".join(of(builder, "RUN"))
    assert "pip wheel --no-deps" in text and ".whl" in text, "the project is built as a wheel and installed"
    assert "--only-binary=:all:" in text, "no dependency is compiled"
    requirements = setup_cfg()["options"]["install_requires"].split()
    names = {re.split(r"[<>=!~\[; ]", req)[0].lower() for req in requirements if req}
    assert names
    mentioned = {name for name in names if re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE)}
    assert not mentioned, f"dependencies listed in the Dockerfile instead of setup.cfg: {mentioned}"
    assert not BUILD_TOOLS.search(text)


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
        if instruction["instruction"] in ("ENV", "ARG", "LABEL"):
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
