"""Object names and namespaces, validated as the API server validates them, with its messages.

Upstream: apimachinery/pkg/util/validation (IsDNS1123Label, IsDNS1123Subdomain, RegexError, MaxLenError)
and apimachinery/pkg/api/validation (ValidateObjectMeta, NameIsDNSSubdomain, maskTrailingDash), worded as
the reference API server words them (the end-to-end tests compare the two).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = re.compile(DNS1123_LABEL_FMT)
_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """`validation.RegexError`, including its odd `'a',  or 'b'` spacing."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _LABEL.fullmatch(value):
        # apimachinery's IsDNS1123Label (as in v1.33): a valid subdomain that is no label has dots. (The
        # v1.24.0-alpha.1 snapshot gave the regex error for every bad label.)
        if _SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': the generated suffix follows it."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


# apiserver/pkg/storage/names: five characters from an alphabet without vowels, the prefix cut to leave room.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_PREFIX = 63 - 5


def generated_name(prefix: str) -> str:
    """`SimpleNameGenerator.GenerateName`: the prefix (cut to 58 characters) and 5 random characters."""
    return prefix[:_MAX_GENERATED_PREFIX] + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


def quoted(value: str) -> str:
    """Go's `%q` for the common case (JSON string quoting is the same for printable text)."""
    return json.dumps(value, ensure_ascii=False)


NameCheck = Callable[[str, bool], list[str]]


def object_meta_errors(
    obj: Any, *, namespaced: bool, name_check: NameCheck = name_is_dns_subdomain, name: str | None = None
) -> list[str]:
    """`ValidateObjectMeta` for name, generateName and namespace: field errors as the API server words them.

    `name`: the name to validate when the object has only generateName (the API server generates it
    before validating). Fields of the wrong type are left to the callers' schemas.
    """
    meta = _meta(obj)
    errors: list[str] = []
    generate = meta.get("generateName")
    if name is None:
        name = meta.get("name")
    if isinstance(generate, str) and generate:
        errors += [_invalid("generateName", generate, m) for m in name_check(generate, True)]
    if isinstance(name, str) and name:
        errors += [_invalid("name", name, m) for m in name_check(name, False)]
    elif not (isinstance(generate, str) and generate):
        errors.append("metadata.name: Required value: name or generateName is required")
    namespace = meta.get("namespace")
    if namespaced and isinstance(namespace, str) and namespace:
        errors += [_invalid("namespace", namespace, m) for m in dns1123_label(namespace)]
    elif not namespaced and isinstance(namespace, str) and namespace:
        errors.append("metadata.namespace: Forbidden: not allowed on this type")
    return errors


def _meta(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _invalid(key: str, value: str, message: str) -> str:
    return f"metadata.{key}: Invalid value: {quoted(value)}: {message}"


def invalid_object(kind: str, obj: Any, *, namespaced: bool) -> str | None:
    """`errors.NewInvalid` for the object's name and namespace: `<Kind> "<name>" is invalid: <errors>` (one
    error plain, several in brackets, as the API server joins them), or None when both are valid. An
    object with only generateName is named first, as the API server does."""
    meta = _meta(obj)
    raw_name = meta.get("name")
    name: str = raw_name if isinstance(raw_name, str) else ""
    generate = meta.get("generateName")
    if not name and isinstance(generate, str) and generate:
        name = generated_name(generate)
    errors = object_meta_errors(obj, namespaced=namespaced, name=name)
    if not errors:
        return None
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f"{kind} {quoted(name)} is invalid: {joined}"


def invalid_pod(pod: Any) -> str | None:
    """The API server's Invalid message for a pod's name or namespace (absent namespace: `default`)."""
    if not isinstance(pod, dict):
        return None
    meta = _meta(pod)
    namespaced = {**pod, "metadata": {**meta, "namespace": meta.get("namespace") or "default"}}
    return invalid_object("Pod", namespaced, namespaced=True)
