"""The console scripts: `priority-webhook` (also `python -m webhook`) and `kubectl-priority`.

Both are thin: the parser and dispatch are `webhook.commands.dispatch`, kubectl's conventions are
`webhook.commands.kubectl`, and each command's module loads only when it runs (start-up time).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.commands.dispatch import MAX_ERROR_CHARS, PROG, build_parser, main, one_line

__all__ = ["MAX_ERROR_CHARS", "PROG", "build_parser", "kubectl_main", "main", "one_line"]


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl priority ...`: kubectl runs `kubectl-priority` from PATH with the rest of its line."""
    from webhook.commands import kubectl

    return kubectl.main(argv)
