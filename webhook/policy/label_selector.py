"""Kubernetes label selectors in their string form, parsed and matched as the API server does.

The grammar and checks of apimachinery's `labels.Parse` (what `kubectl get -l` and `?labelSelector=` take):
requirements joined by `,` (AND), each `key`, `!key`, `key=value`, `key==value`, `key!=value`,
`key in (a,b)`, `key notin (a,b)`, `key>N`, `key<N`; spaces, tabs and newlines between tokens are ignored;
`in` and `notin` are keywords only where an operator is expected. Keys must be qualified names
(`prefix/name`) and values label values, so a selector that can never match a real label is refused
rather than silently matching nothing. The empty selector matches everything.

Matching: `=`/`==`/`in` need the label with one of the values; `!=`/`notin` hold when the label is absent
or has none of them; `>`/`<` need an integer label compared as a 64-bit integer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

WHITESPACE = " \t\r\n"
SPECIAL = "=!(),<>"
# The operator tokens, longest first (the lexer takes the longest that fits).
SYMBOLS = ("!=", "==", "=", "!", "(", ")", ",", "<", ">")
IN, NOT_IN, EXISTS, NOT_EXISTS = "in", "notin", "exists", "!"
EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER, LESS = "=", "==", "!=", ">", "<"
EXACT_OPERATORS = (EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER, LESS)

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
MAX_NAME, MAX_PREFIX, MAX_VALUE = 63, 253, 63
MAX_SHOWN = 80
INT64 = 2**63


class SelectorError(ValueError):
    """A selector `labels.Parse` refuses; the message is one line saying where and why."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # one of IN, NOT_IN, EXISTS, NOT_EXISTS, EXACT_OPERATORS
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return value is not None and value in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return value is None or value not in self.values
        if self.operator == EXISTS:
            return value is not None
        if self.operator == NOT_EXISTS:
            return value is None
        number = _int64(value) if value is not None else None
        if number is None:
            return False
        (bound,) = self.values
        return number > int(bound) if self.operator == GREATER else number < int(bound)


@dataclass(frozen=True, slots=True)
class Selector:
    """Parsed requirements, all of which must hold; `text` is the selector as written (for messages)."""

    text: str
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    """The selector `text` denotes, or SelectorError naming the first problem."""
    return Selector(text, tuple(_Parser(text).requirements()))


# -- lexing -------------------------------------------------------------------------------------------
_IDENT, _END = "identifier", "end of string"


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs: kind is a symbol from SYMBOLS, `in`/`notin`, _IDENT, and a final _END."""
    tokens, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch in WHITESPACE:
            i += 1
        elif ch in SPECIAL:
            symbol = next(s for s in SYMBOLS if text.startswith(s, i))
            tokens.append((symbol, symbol))
            i += len(symbol)
        else:
            start = i
            while i < len(text) and text[i] not in WHITESPACE and text[i] not in SPECIAL:
                i += 1
            word = text[start:i]
            tokens.append((word if word in (IN, NOT_IN) else _IDENT, word))
    tokens.append((_END, ""))
    return tokens


# -- parsing ------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self, *, value: bool = True) -> tuple[str, str]:
        """The next token; where a value is expected, `in` and `notin` are plain identifiers."""
        kind, literal = self.tokens[self.at]
        return (_IDENT, literal) if value and kind in (IN, NOT_IN) else (kind, literal)

    def take(self, *, value: bool = True) -> tuple[str, str]:
        token = self.peek(value=value)
        if self.at < len(self.tokens) - 1:
            self.at += 1
        return token

    def requirements(self) -> list[Requirement]:
        found: list[Requirement] = []
        if self.peek()[0] == _END:
            return found
        while True:
            kind, literal = self.peek()
            if kind not in (_IDENT, NOT_EXISTS):
                raise SelectorError(f"found {_shown(literal)}, expected a key, !key or the end")
            found.append(self.requirement())
            kind, literal = self.take()
            if kind == _END:
                return found
            if kind != ",":
                raise SelectorError(f"found {_shown(literal)}, expected ',' or the end")
            if self.peek()[0] not in (_IDENT, NOT_EXISTS):
                raise SelectorError(f"found {_shown(self.peek()[1])}, expected a key after ','")

    def requirement(self) -> Requirement:
        negated = self.peek()[0] == NOT_EXISTS
        if negated:
            self.take()
        kind, key = self.take()
        if kind != _IDENT:
            raise SelectorError(f"found {_shown(key)}, expected a key")
        check_key(key)
        if negated or self.peek()[0] in (_END, ","):
            return Requirement(key, NOT_EXISTS if negated else EXISTS)
        kind, literal = self.take(value=False)
        if kind in (IN, NOT_IN):
            values = self.value_list()
        elif kind in EXACT_OPERATORS:
            values = frozenset((self.exact_value(),))
        else:
            raise SelectorError(
                f"found {_shown(literal)} after key {shown(key)}, expected one of =, ==, !=, in, notin, >, <"
            )
        for value in values:
            check_value(key, value)
        if kind in (GREATER, LESS):
            (bound,) = values
            if _int64(bound) is None:
                raise SelectorError(f"key {shown(key)}: {kind} needs an integer value, got {shown(bound)}")
        return Requirement(key, kind, values)

    def value_list(self) -> frozenset[str]:
        """`( a, b )`. `()`, a leading or trailing comma and a doubled one stand for the empty value; a
        comma doubled right before `)` (`(a,,)`, `(,,)`) is refused, as upstream's list parser does."""
        kind, literal = self.take()
        if kind != "(":
            raise SelectorError(f"found {_shown(literal)}, expected '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return frozenset({""})
        if kind not in (_IDENT, ","):
            raise SelectorError(f"found {_shown(literal)}, expected ',', ')' or a value")
        values: set[str] = set()
        while True:
            kind, literal = self.take()
            if kind == _IDENT:
                values.add(literal)
                following, shown_next = self.peek()
                if following == ")":
                    break
                if following != ",":
                    raise SelectorError(f"found {_shown(shown_next)} in a value list, expected ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")  # `(,`
                following = self.peek()[0]
                if following == ")":
                    values.add("")  # `,)`
                    break
                if following == ",":
                    self.take()
                    values.add("")  # `,,`
            else:
                raise SelectorError(f"found {_shown(literal)} in a value list, expected ',' or a value")
        self.take()  # the `)` seen above
        return frozenset(values)

    def exact_value(self) -> str:
        """The value after `=`, `!=`, `>`, ...: empty when the requirement ends right there."""
        kind, literal = self.peek()
        if kind in (_END, ","):
            return ""
        self.take()
        if kind != _IDENT:
            raise SelectorError(f"found {_shown(literal)}, expected a value")
        return literal


def _shown(literal: str) -> str:
    return shown(literal) if literal else "the end"


def shown(text: str) -> str:
    """`text` quoted for a message: cut to MAX_SHOWN characters, so an error stays a short line."""
    return repr(text[:MAX_SHOWN]) + ("..." if len(text) > MAX_SHOWN else "")


def _int64(text: str) -> int | None:
    if not _INTEGER.fullmatch(text):
        return None
    number = int(text)
    return number if -INT64 <= number < INT64 else None


# -- label syntax -------------------------------------------------------------------------------------
def key_problem(key: str) -> str | None:
    """Why `key` is not a qualified label name (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if prefix.count("/"):
        return "a key has at most one '/'"
    if prefix and (len(prefix) > MAX_PREFIX or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"the prefix must be a DNS subdomain (lower case, at most {MAX_PREFIX} characters)"
    if not name:
        return "the name must not be empty"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return (
            f"the name must be at most {MAX_NAME} alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def value_problem(value: str) -> str | None:
    """Why `value` is not a label value, or None (the empty value is one)."""
    if value and (len(value) > MAX_VALUE or not _NAME.fullmatch(value)):
        return (
            f"a value must be empty or at most {MAX_VALUE} alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def check_key(key: str) -> None:
    problem = key_problem(key)
    if problem:
        raise SelectorError(f"invalid key {shown(key)}: {problem}")


def check_value(key: str, value: str) -> None:
    problem = value_problem(value)
    if problem:
        raise SelectorError(f"invalid value {shown(value)} for key {shown(key)}: {problem}")
