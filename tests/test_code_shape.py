"""No file under webhook/ has more than MAX_LOGIC lines of logic: a module that long does more than one
thing, and is split along its seams with names that say what each part decides.

A line of logic holds a token that is not a comment and not part of a docstring (blank lines, comments and
docstrings are free: they explain, they do not decide).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webhook"
MAX_LOGIC = 300
_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if first is not None and isinstance(value, ast.Constant) and isinstance(value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def logic_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    docstrings = _docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _SKIP:
            continue
        for line in range(token.start[0], token.end[0] + 1):
            if line not in docstrings:
                lines.add(line)
    return len(lines)


def test_counting_leaves_out_blank_lines_comments_and_docstrings() -> None:
    source = '''"""Module docstring,
on two lines."""

# a comment
import os  # code with a comment


class A:
    """Class docstring."""

    def f(self) -> str:
        """Function docstring."""
        text = """not a docstring:
        a string that is assigned"""
        return text
'''
    # import, class, def, the two lines of the assigned string, return
    assert logic_lines(source) == 6


def _files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _files())
def test_no_module_has_more_than_300_lines_of_logic(path: str) -> None:
    count = logic_lines((ROOT / path).read_text())
    assert count <= MAX_LOGIC, (
        f"{path}: {count} lines of logic (at most {MAX_LOGIC}): split it along its seams"
    )
