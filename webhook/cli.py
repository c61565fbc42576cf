"""`priority-webhook` (also `python -m webhook`): one subcommand per module in webhook/commands/."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from webhook import __version__
from webhook.commands import certs, plan, review, serve, sidecar, victims
from webhook.documents import InputError

COMMANDS = (serve, review, victims, plan, certs, sidecar)
PROG = "priority-webhook"


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
    except InputError as err:
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 141
