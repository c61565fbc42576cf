"""`kubectl-priority`: the commands as a kubectl plugin, with kubectl's own flag conventions.

kubectl runs any `kubectl-NAME` on PATH for `kubectl NAME ...`, passing the rest of the command line and
its environment (so `$KUBECONFIG` too). This translates kubectl's `--kubeconfig`, `--context` and
`-n/--namespace` into the options of `priority-webhook review|victims|plan`:

    kubectl priority review deploy.yaml -n shop       # offline: -n for objects that name no namespace
    kubectl priority victims --node N --pod pod.yaml  # node N and its pods read from the current context
    kubectl priority plan --pod pod.yaml              # the cluster read live (plan --kubeconfig)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import yaml

from webhook import __version__
from webhook.commands import dispatch
from webhook.files.documents import InputError

PROG = "kubectl priority"
COMMANDS = ("review", "victims", "plan")
USAGE = f"""usage: {PROG} {{review,victims,plan}} [ARGS...] [--kubeconfig FILE] [--context NAME] [-n NS]

  review FILE...            the admission decision offline (any manifest; -n: namespace if none named)
  victims --node N --pod F  kubelet admission of a pod on node N, read live (or --node FILE --pods FILE)
  plan --pod F              scheduler preemption what-if on the cluster (or --cluster FILE)

Every other option is the command's own: {PROG} COMMAND --help. {PROG} --version: the version.
"""


def _kubectl_flags(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """kubectl's flags (anywhere on the line) and the rest in order."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("-n", "--namespace")
    return parser.parse_known_args(list(argv))


def _options(command: str) -> set[str]:
    """The option strings `priority-webhook COMMAND` accepts (so new options are used once they exist)."""
    sub = next(
        a for a in dispatch.build_parser(only=command)._actions if isinstance(a, argparse._SubParsersAction)
    )
    return {s for action in sub.choices[command]._actions for s in action.option_strings}


def _has(rest: Sequence[str], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in rest)


def translate(argv: Sequence[str]) -> list[str]:
    """`kubectl priority ...` arguments to `priority-webhook ...` arguments."""
    flags, rest = _kubectl_flags(argv)  # kubectl's flags may come before or after the command
    if not rest or rest[0] not in COMMANDS:
        raise InputError(f"expected one of {', '.join(COMMANDS)} (see {PROG} --help)")
    command, rest = rest[0], rest[1:]
    out = [command, *rest]
    if command == "review":
        if flags.namespace:
            out += ["--namespace", flags.namespace]
        return out
    if command == "victims":
        if not _has(rest, "--pods"):  # live: the cluster of the kubeconfig/context, as kubectl
            out += _cluster_flags(flags, _options("victims"))
        return out
    if not _has(rest, "--cluster"):
        options = _options("plan")
        if "--kubeconfig" not in options:
            raise InputError("plan: --cluster FILE is needed (this version of plan cannot read a cluster)")
        out += _cluster_flags(flags, options, explicit=True)
    return out


def _cluster_flags(flags: argparse.Namespace, options: set[str], *, explicit: bool = False) -> list[str]:
    """`--kubeconfig F [--context C]`; a command without `--context` gets a kubeconfig of that context.

    `explicit`: the command needs `--kubeconfig` even for kubectl's defaults (`plan` takes `--cluster` or
    `--kubeconfig`), so the default file is named, or, for several files in $KUBECONFIG, merged."""
    kubeconfig = flags.kubeconfig
    if flags.context and "--context" not in options:
        return ["--kubeconfig", _context_kubeconfig(kubeconfig, flags.context)]
    if kubeconfig is None and explicit:
        paths = _kubeconfig_paths(None)
        kubeconfig = paths[0] if len(paths) == 1 else _context_kubeconfig(None, flags.context)
    out = ["--kubeconfig", kubeconfig] if kubeconfig else []
    return out + (["--context", flags.context] if flags.context else [])


def _context_kubeconfig(kubeconfig: str | None, context: str | None) -> str:
    """A private kubeconfig file holding only `context` (None: the current one), its cluster and user."""
    paths = [p for p in _kubeconfig_paths(kubeconfig) if os.path.exists(p)]
    if not paths:
        raise InputError(f"kubeconfig {', '.join(_kubeconfig_paths(kubeconfig))}: not found")
    merged = _merged(paths)
    context = context or merged["current-context"]
    contexts = {c.get("name"): c for c in merged["contexts"]}
    if context not in contexts:
        raise InputError(f'context "{context}": not found in kubeconfig {", ".join(paths)}')
    ctx = contexts[context].get("context") or {}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "contexts": [contexts[context]],
        "clusters": [c for c in merged["clusters"] if c.get("name") == ctx.get("cluster")],
        "users": [u for u in merged["users"] if u.get("name") == ctx.get("user")],
    }
    fd, path = tempfile.mkstemp(prefix="kubectl-priority-", suffix=".kubeconfig")  # mode 0600
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f)
    _TEMPORARY.append(path)
    return path


_TEMPORARY: list[str] = []


def _kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    from webhook.kube.config import kubeconfig_paths  # the cluster modules: only when a cluster is

    return kubeconfig_paths(kubeconfig)


def _merged(paths: list[str]) -> dict[str, Any]:
    """kubectl's merge of several kubeconfig files: for each named entry the first file that has it wins.
    Relative file references (certificates) are made absolute, since the result is written elsewhere."""
    merged: dict[str, Any] = {"contexts": [], "clusters": [], "users": [], "current-context": None}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                config = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as err:
            raise InputError(f"kubeconfig {path}: {str(err).splitlines()[0]}") from None
        if not isinstance(config, dict):
            raise InputError(f"kubeconfig {path}: not a kubeconfig")
        if merged["current-context"] is None and isinstance(config.get("current-context"), str):
            merged["current-context"] = config["current-context"]
        base = os.path.dirname(os.path.abspath(path))
        for key, inner in (("contexts", "context"), ("clusters", "cluster"), ("users", "user")):
            seen = {e.get("name") for e in merged[key]}
            for entry in config.get(key) or []:
                if isinstance(entry, dict) and entry.get("name") not in seen:
                    merged[key].append(_absolute(entry, inner, base))
    return merged


def _absolute(entry: dict[str, Any], inner: str, base: str) -> dict[str, Any]:
    body = dict(entry.get(inner) or {})
    for key in ("certificate-authority", "client-certificate", "client-key", "tokenFile"):
        if isinstance(body.get(key), str) and not os.path.isabs(body[key]):
            body[key] = os.path.join(base, body[key])
    return {**entry, inner: body}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"{PROG} {__version__}")
        return 0
    try:
        translated = translate(argv)
    except InputError as err:
        print(f"{PROG}: error: {dispatch.one_line(str(err))}", file=sys.stderr)
        return 2
    try:
        return dispatch.main(translated, prog=PROG)
    finally:
        for path in _TEMPORARY:
            os.unlink(path)
        _TEMPORARY.clear()
