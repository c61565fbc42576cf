"""Field validation the API server does before admission, with its own words, for the fields we read.

Quantities are decoded, not validated: a value `resource.ParseQuantity` refuses makes the whole request
undecodable, and the API server answers 400 BadRequest
`Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression '...'`
(no field path: the JSON decoder stops at the first bad value). This is apimachinery's scanner
(`parseQuantityString`, `ParseQuantity`, the suffixer), ported, so that a value is refused exactly when
the API server refuses it: `{{cpurequest}}`, `1.5.3`, `10Q` or `1e` but not `0.5`, `1.`, `+5`, `1e3`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_SPLIT_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
SUFFIX_WRONG = "unable to parse quantity's suffix"
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_SUFFIXES = frozenset(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])


def quantity_error(value: Any) -> str | None:
    """Why the API server cannot decode `value` as a Quantity (its message), or None if it can."""
    if value is None or isinstance(value, bool):
        return None if value is None else FORMAT_WRONG
    if isinstance(value, int | float):
        text = repr(value)  # a YAML/JSON number is decoded from its text
    elif isinstance(value, str):
        text = value.strip()  # UnmarshalJSON trims blanks around the quoted text
    else:
        return FORMAT_WRONG
    if not text:
        return FORMAT_WRONG
    if text == "0":
        return None
    suffix = _scan(text)
    if suffix is None:
        return FORMAT_WRONG
    if suffix in _SUFFIXES:
        return None
    if len(suffix) > 1 and suffix[0] in "eE" and _go_int(suffix[1:]):
        return None
    return SUFFIX_WRONG


def _scan(s: str) -> str | None:
    """parseQuantityString: the suffix, or None for ErrFormatWrong."""
    pos, end = 0, len(s)
    if s[0] in "+-":
        pos = 1
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:
        return ""
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return ""
    if s[pos] == ".":
        pos += 1
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        if pos >= end:
            return ""
    start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return s[start:]
    if s[pos] in "+-":
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return s[start:]
    return None


def _go_int(text: str) -> bool:
    """strconv.ParseInt(text, 10, 64) succeeds."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return bool(digits) and all(c in _DIGITS for c in digits) and -(2**63) <= int(text) < 2**63


def _resource_maps(spec: dict[str, Any]) -> Iterator[Any]:
    for key in ("containers", "initContainers", "ephemeralContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                yield resources.get("requests")
                yield resources.get("limits")
    resources = spec.get("resources")
    if isinstance(resources, dict):
        yield resources.get("requests")
        yield resources.get("limits")
    yield spec.get("overhead")
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else ():
        if not isinstance(volume, dict):
            continue
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, dict):
            yield {"sizeLimit": empty_dir.get("sizeLimit")}
        claim = ((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")
        resources = claim.get("resources") if isinstance(claim, dict) else None
        if isinstance(resources, dict):
            yield resources.get("requests")
            yield resources.get("limits")


def pod_spec_quantity_error(spec: Any) -> str | None:
    """The decoder's error for the first quantity of a pod spec it cannot decode, or None."""
    if not isinstance(spec, dict):
        return None
    for values in _resource_maps(spec):
        if isinstance(values, dict):
            for value in values.values():
                error = quantity_error(value)
                if error:
                    return error
    return None


def undecodable(obj: dict[str, Any], spec: Any) -> str | None:
    """`<Kind> in version "<v>" cannot be handled as a <Kind>: <error>` for an object whose pod spec
    (its own, or its template's) holds a quantity the API server cannot decode; else None."""
    error = pod_spec_quantity_error(spec)
    if error is None:
        return None
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    version = api_version.rsplit("/", 1)[-1] if isinstance(api_version, str) else ""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {error}'
