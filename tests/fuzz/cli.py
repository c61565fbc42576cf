"""Run a command in-process through `webhook.cli.main` and hold its outcome to the CLI contract."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from tests.fuzz.oracle import assert_one_line
from webhook.cli import main


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run(argv: Sequence[str]) -> Outcome:
    """`main(argv)` with stdout/stderr captured; any exception escaping main is a bug and propagates."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse usage errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return Outcome(code, out.getvalue(), err.getvalue())


# What may precede the error when earlier documents of the same file were answered (as kubectl prints).
PER_OBJECT_PREFIXES = ("Error from server (", "The ", "Warning: ")


def assert_clear_error(outcome: Outcome, command: str) -> None:
    """Exit 2, nothing on stdout, and one error line `priority-webhook COMMAND: error: ...` last on stderr
    (after, at most, the per-object denial and warning lines of documents answered before the bad one)."""
    assert outcome.code == 2, outcome
    assert outcome.out == "", outcome.out[:300]
    *before, last = outcome.err.splitlines() or [""]
    assert last.startswith(f"priority-webhook {command}: error: "), outcome.err[:500]
    assert_one_line(last)
    for line in before:
        assert line.startswith(PER_OBJECT_PREFIXES), f"unexpected stderr line: {line[:300]!r}"


def parse_output(text: str, fmt: str) -> object:
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)
