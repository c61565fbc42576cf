"""`priority-webhook` (also `python -m webhook`): one subcommand per module in webhook/commands/."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from webhook import __version__
from webhook.commands import certs, plan, review, serve, sidecar, victims
from webhook.files.documents import InputError
from webhook.kube import ConfigError

COMMANDS = (serve, review, victims, plan, certs, sidecar)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Out-of-tree Kubernetes pod priority.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (InputError, ConfigError) as err:  # bad input, or a cluster configuration that cannot be used
        print(f"{PROG} {args.command}: error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
