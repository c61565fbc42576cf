"""The command line's parser and dispatch, shared by `priority-webhook` and `kubectl priority`.

A command's module (and what it imports: the kubernetes client, Flask, cryptography, the planner) is
loaded only when that command runs; `--help` and the other commands never pay for it. A kubectl plugin
is run by hand and from pre-commit hooks on every file, so its start-up is the time users feel.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from webhook import __version__
from webhook.files import InputError
from webhook.kube import ConfigError


class Command(NamedTuple):
    module: str
    summary: str  # the one-line help of `priority-webhook --help`, also the command parser's own help


# In the order --help lists them. Each command's module registers its parser with `add_command`, so the
# one-line help is written here only.
COMMANDS: dict[str, Command] = {
    "serve": Command(
        "webhook.commands.serve", "serve /mutate, /validate, /healthz, /readyz, /metrics over HTTPS"
    ),
    "review": Command("webhook.commands.review", "run the admission decision offline"),
    "victims": Command(
        "webhook.commands.victims", "kubelet-style admission of a pod on a node, with critical-pod preemption"
    ),
    "plan": Command("webhook.commands.plan", "scheduler-style preemption what-if on a cluster snapshot"),
    "certs": Command(
        "webhook.commands.certs", "generate a CA + serving certificate (ECDSA P-256); print the caBundle"
    ),
    "sidecar": Command(
        "webhook.commands.sidecar", "node agent: evict pods to admit critical pods the kubelet rejected"
    ),
}
PROG = "priority-webhook"
# Errors quote the input they refuse; a huge or multi-line value must not turn the one-line error into a
# wall of text, so the message is joined onto one line and its middle elided beyond this length.
MAX_ERROR_CHARS = 500


def one_line(message: str) -> str:
    text = " ".join(message.splitlines())
    if len(text) <= MAX_ERROR_CHARS:
        return text
    keep = (MAX_ERROR_CHARS - 5) // 2
    return f"{text[:keep]} ... {text[-keep:]}"


def build_parser(only: str | None = None, prog: str = PROG) -> argparse.ArgumentParser:
    """The whole parser; with `only`, that command's options and a one-line stub for every other."""
    parser = argparse.ArgumentParser(prog=prog, description="Out-of-tree Kubernetes pod priority.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(command.module).register(sub)
        else:
            sub.add_parser(name, help=command.summary, add_help=False)
    return parser


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, description: str
) -> argparse.ArgumentParser:
    """The parser of command `name`, with its one-line help from COMMANDS."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=COMMANDS[name].summary, description=description
    )
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command named on the line (the first argument that is not an option), if it is one."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        if arg == "--":
            return None
    return None


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=command_of(argv) or "", prog=prog)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (InputError, ConfigError) as err:  # bad input, or a cluster configuration that cannot be used
        print(f"{prog} {args.command}: error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
