"""Each command's one-line help is written once (dispatch.COMMANDS) and shown the same whichever command
the parser was built for: in full (the command's own module registered it) or as a stub."""

from __future__ import annotations

import argparse

import pytest

from webhook.commands.dispatch import COMMANDS, build_parser


def summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help for choice in sub._choices_actions}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_one_line_help_is_the_same_stubbed_or_registered(command: str) -> None:
    stubbed = summaries(build_parser(only=""))
    registered = summaries(build_parser(only=command))
    assert stubbed == registered == {name: c.summary for name, c in COMMANDS.items()}
