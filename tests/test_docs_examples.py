"""The documentation's command examples, run verbatim from the repository root.

Every line of a `sh` or `console` block in README.md and docs/*.md that runs `priority-webhook` or
`kubectl priority` is one of:
* a usage line (optional parts in brackets): every option it names must be the command's own;
* a cluster line (a live node, `--kubeconfig`, or a file a `kubectl get` in the block writes): run against
  a real API server by tests/e2e/test_docs_live.py;
* a `helm template` pipeline: the chart it names rendered with Helm's own engine (helm-python-sdk), a chart
  of `helm create`'s where the name is no folder, and piped into the rest of the line as written;
* an offline example: run as written; it must answer (exit 0, or 1 for a denial / no fit), never fail on
  its input (exit 2). A `console` block's commands are run in turn and their output compared.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from testkit.chart_rendering import template
from webhook.commands.dispatch import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OURS = re.compile(
    r"(^|\| *|\.venv/bin/|\$ )(priority-webhook (review|victims|plan)|kubectl priority)\b", re.M
)


@dataclass(frozen=True)
class Example:
    page: str
    lang: str
    line: str
    block: str

    def __str__(self) -> str:
        return f"{self.page}: {self.line}"


def _blocks() -> list[tuple[str, str, str]]:
    out = []
    for page in PAGES:
        for lang, body in re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S):
            out.append((page.name, lang, body.replace("\\\n", " ")))
    return out


def examples() -> list[Example]:
    found = []
    for page, lang, body in _blocks():
        if lang not in ("sh", "console"):
            continue
        for raw in body.splitlines():
            line = raw.removeprefix("$ ").strip()
            if OURS.search(line):
                found.append(Example(page, lang, line, body))
    return found


def command(line: str) -> str:
    """The line without its trailing comment."""
    return re.sub(r"\s+#.*$", "", line)


def is_usage(line: str) -> bool:
    return bool(re.search(r"\[[^\]]*\]", command(line)))


def written_by_kubectl(block: str) -> set[str]:
    return set(re.findall(r"^kubectl get .*> *(\S+)", block, re.M))


def needs_cluster(example: Example) -> bool:
    cmd = command(example.line)
    words = cmd.split()
    if "--kubeconfig" in words or any(w in written_by_kubectl(example.block) for w in words):
        return True
    if " victims " in f" {cmd} " and "--pods" not in words:
        return True
    return " plan " in f" {cmd} " and "--cluster" not in words


ALL = examples()
USAGE = [e for e in ALL if is_usage(e.line)]
HELM = [e for e in ALL if not is_usage(e.line) and command(e.line).startswith("helm ")]
CLUSTER = [e for e in ALL if not is_usage(e.line) and e not in HELM and needs_cluster(e)]
OFFLINE = [e for e in ALL if e not in USAGE and e not in HELM and e not in CLUSTER]


def test_the_docs_have_examples_of_every_kind():
    assert len(OFFLINE) >= 8 and USAGE and CLUSTER and HELM, [str(e) for e in ALL]


def _env() -> dict[str, str]:
    path = [str(Path(sys.executable).parent)]  # the console scripts: priority-webhook, kubectl-priority
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    kubectl = str(Path(assets) / "kubectl") if assets else shutil.which("kubectl")
    if kubectl:
        path.append(str(Path(kubectl).parent))
    return {
        **os.environ,
        "PATH": os.pathsep.join([*path, os.environ.get("PATH", "")]),
        "KUBECONFIG": "/nonexistent",
    }


def sh(line: str) -> subprocess.CompletedProcess[str]:
    # The pages' `.venv/bin/` is the virtual environment running the tests (scripts/test's in a Debian root
    # is not the checkout's .venv).
    line = re.sub(r"(?<![\w/.])\.venv/bin/", f"{Path(sys.executable).parent}/", line)
    return subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("example", [e for e in OFFLINE if e.lang == "sh"], ids=str)
def test_offline_examples_answer(example: Example):
    if example.line.startswith("kubectl priority") and not shutil.which("kubectl", path=_env()["PATH"]):
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is needed for the plugin's examples")
        pytest.skip("kubectl not found")
    result = sh(command(example.line))
    assert result.returncode in (0, 1), result.stderr
    assert "error:" not in result.stderr, result.stderr


def _console_blocks() -> list[tuple[str, str]]:
    return [(page, body) for page, lang, body in _blocks() if lang == "console" and OURS.search(body)]


@pytest.mark.parametrize(("page", "body"), _console_blocks(), ids=lambda v: v if v.endswith(".md") else "")
def test_console_blocks_print_what_they_show(page: str, body: str):
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    # Each command's stdout and stderr, in turn; `$?` stays the command's own for an `echo $?` after it.
    script = "\n".join(f"{{ {cmd} ; }} 2>&1\nrc=$?\necho '<<<END>>>'\n(exit $rc)" for cmd, _ in commands)
    outputs = sh(script).stdout.split("<<<END>>>\n")
    for (cmd, expected), output in zip(commands, outputs, strict=False):
        assert output.splitlines() == expected, cmd


@pytest.mark.parametrize("example", USAGE, ids=str)
def test_usage_lines_name_only_real_options(example: Example):
    cmd = command(example.line)
    found = re.search(r"(review|victims|plan)\b", cmd)
    assert found is not None, cmd
    name = found.group(1)
    sub = next(a for a in build_parser(only=name)._actions if a.dest == "command")
    parsers: Any = sub.choices  # the subcommands' parsers, by name
    options = {s for action in parsers[name]._actions for s in action.option_strings}
    named = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", cmd.split(name, 1)[1]))
    assert named <= options, named - options


def helm_template(line: str, cwd: Path) -> tuple[str, str]:
    """The `helm template [NAME] CHART [-n NS]` that starts a pipeline, rendered, and the rest of the line.

    The chart is a folder of the repository (the examples run from its root); a name that is none (the pages'
    `my-chart`, the reader's own) is made the way a reader's chart starts out: `helm create`'s (the SDK's
    Chart.create), in `cwd`."""
    head, _, rest = command(line).partition("|")
    words = shlex.split(head)
    assert words[:2] == ["helm", "template"], line
    namespace, names = "default", []
    options = iter(words[2:])
    for word in options:
        if word in ("-n", "--namespace"):
            namespace = next(options)
        else:
            assert not word.startswith("-"), f"{word}: teach helm_template this option of helm template"
            names.append(word)
    assert len(names) in (1, 2), line
    folder = ROOT / names[-1]
    if not (folder / "Chart.yaml").is_file():
        folder = cwd / names[-1]
        folder.parent.mkdir(parents=True, exist_ok=True)
        helm.Chart.create(folder.name, folder.parent).close()
    release = names[0] if len(names) == 2 else "release-name"
    with helm.Chart.load(folder) as chart:
        return template(chart, release=release, namespace=namespace), rest


def classes_as_kubectl_writes_them() -> str:
    """A cluster's PriorityClasses as `kubectl get pc -o yaml` writes them: a v1 List (the example classes)."""
    items = [
        doc for doc in yaml.safe_load_all((ROOT / "examples" / "priorityclasses.yaml").read_text()) if doc
    ]
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.mark.parametrize("example", HELM, ids=str)
def test_helm_pipelines(example: Example, tmp_path: Path):
    rendered, rest = helm_template(example.line, tmp_path)
    for name in written_by_kubectl(example.block):  # what the block's `kubectl get ... > FILE` would write
        (tmp_path / name).write_text(classes_as_kubectl_writes_them())
    result = subprocess.run(
        ["bash", "-c", rest],
        input=rendered,
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    documents = [doc for doc in yaml.safe_load_all(rendered) if doc]
    reviewed = yaml.safe_load(result.stdout)
    assert reviewed["kind"] == "List"
    names = [(doc["kind"], doc["metadata"]["name"]) for doc in documents]
    assert [(item["kind"], item["metadata"]["name"]) for item in reviewed["items"]] == names
    pod_specs = [i["spec"] for i in reviewed["items"] if i["kind"] == "Pod"]
    pod_specs += [i["spec"]["template"]["spec"] for i in reviewed["items"] if i["kind"] == "Deployment"]
    assert pod_specs and all(isinstance(spec.get("priority"), int) for spec in pod_specs), pod_specs
