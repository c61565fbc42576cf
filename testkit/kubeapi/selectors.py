"""Field and label selectors as the API server parses and applies them.

Field selectors: `path=value`, `path==value`, `path!=value`, comma-joined (AND). The real API server
accepts only a few field labels per resource (`metadata.name`, `metadata.namespace`, `spec.nodeName`,
`status.phase`, ...); this server accepts any dotted path, and a missing field compares as "", which is
what the real server does for the supported labels. Values may escape `\\`, `,` and `=` with a backslash.

Label selectors: equality (`k=v`, `k==v`, `k!=v`), existence (`k`, `!k`) and sets (`k in (a,b)`,
`k notin (a,b)`), comma-joined.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, Any]], bool]


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest."""


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise SelectorError(f"invalid selector {text!r}: trailing backslash")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of a dotted field, as the API server's field sets hold it ("" when absent)."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return str(node).lower()
    return str(node)


def parse_field_selector(selector: str | None) -> Predicate:
    """A predicate on objects; raises SelectorError for a malformed selector."""
    if not selector:
        return lambda obj: True
    terms: list[tuple[str, str, bool]] = []
    for term in _split_unescaped(selector, ","):
        if not term:
            continue
        for op, negate in (("!=", True), ("==", False), ("=", False)):
            index = term.find(op)
            if index > 0:
                path, value = term[:index], term[index + len(op) :]
                terms.append((path.strip(), _unescape(value), negate))
                break
        else:
            raise SelectorError(f'invalid field selector: "{term}": no operator')
    return lambda obj: all((field_value(obj, path) == value) != negate for path, value, negate in terms)


_SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_label_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


Check = Callable[[Mapping[str, str]], bool]


def _one_of(key: str, values: set[str]) -> Check:
    """`key in (values)`, `key=value`: the label is there with one of the values."""
    return lambda labels: labels.get(key) in values


def _none_of(key: str, values: set[str]) -> Check:
    """`key notin (values)`, `key!=value`: the label is absent or has another value."""
    return lambda labels: labels.get(key) not in values


def _has(key: str, present: bool) -> Check:
    """`key` / `!key`."""
    return lambda labels: (key in labels) is present


def parse_label_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    checks: list[Check] = []
    for term in _split_label_terms(selector):
        match = _SET_TERM.match(term)
        if match:
            key, op, raw = match.groups()
            values = {v.strip() for v in raw.split(",") if v.strip()}
            checks.append(_one_of(key, values) if op == "in" else _none_of(key, values))
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            checks.append(_none_of(key, {value}))
        elif "=" in term:
            key, value = (s.strip() for s in re.split("==?", term, maxsplit=1))
            checks.append(_one_of(key, {value}))
        elif term.startswith("!"):
            checks.append(_has(term[1:].strip(), False))
        elif re.fullmatch(r"[A-Za-z0-9._/-]+", term):
            checks.append(_has(term, True))
        else:
            raise SelectorError(f"unable to parse requirement: {term!r}")

    def predicate(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return predicate
