"""Reading objects for the pod model: fields checked by type, quantities, resource lists and their
arithmetic, and the one-line messages that name a bad value.

Quantities are parsed once with `kubernetes.utils.parse_quantity` and kept as integers: cpu in
millicores, everything else in base units (bytes, counts). Sums are taken in nano units and rounded up
only at the end, as Kubernetes sums `Quantity` values exactly and then rounds `MilliValue()`/`Value()` up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Any

from webhook.k8s import InvalidObject as InvalidObject  # raised by every reader of objects here
from webhook.preemption.kubernetes_quantity import parse_quantity as _k8s_parse_quantity  # loaded alone

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
# apimachinery caps quantities at 2^63-1 (in the unit they are read in).
MAX_INT64 = 2**63 - 1
NANO = 10**9
MILLI_IN_NANO = 10**6

# <signedNumber><suffix> of apimachinery's resource.Quantity grammar; Python's Decimal alone would also
# take "NaN", "1_000" or surrounding blanks, which the API server refuses.
_QUANTITY = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?")

SHOWN_CHARS = 60  # an error echoes at most this much of a bad value, so it stays one readable line


def shown(value: Any) -> str:
    """`repr(value)`, cut to SHOWN_CHARS: enough to recognise the bad value in a message."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}..."


def shown_name(name: str) -> str:
    """A map key (resource or label name) inside a field path, cut like `shown`; quoted (`repr`) when it
    has unprintable characters, so that a line break in a key cannot split the message."""
    if not name.isprintable():
        return shown(name)
    return name if len(name) <= SHOWN_CHARS else f"{name[:SHOWN_CHARS]}..."


class InvalidQuantity(InvalidObject):
    """A quantity that is not valid: the message names the resource/field and the bad value."""


def field(obj: Any, key: str, path: str, kind: type = dict, default: Any = None) -> Any:
    """`obj[key]` checked against `kind`; None/missing gives `default` (the API server's omitempty)."""
    value = obj.get(key) if isinstance(obj, dict) else None  # JSON/YAML objects are dicts
    if value is None:
        return default
    if not isinstance(value, kind):
        want = _TYPE_NAMES.get(kind, kind.__name__)
        raise InvalidObject(f"{path}.{key}: must be {want}, got {type_name(value)}")
    return value


_TYPE_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


@lru_cache(maxsize=4096)
def nano_cached(value: str) -> int | None:
    if not _QUANTITY.fullmatch(value):
        return None
    try:
        amount: Decimal = _k8s_parse_quantity(value)
    except ValueError:
        return None
    if amount < 0:
        return -1
    amount = min(amount, Decimal(MAX_INT64))
    return int((amount * NANO).to_integral_value(rounding=ROUND_CEILING))


def quantity_nano(value: str | int | float, where: str) -> int:
    """A non-negative quantity in nano units (apimachinery keeps nano precision, rounding up)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidQuantity(f"{where}: quantity must be a string or a number, got {type(value).__name__}")
    # A YAML/JSON number is read by its literal text, as the API server does: 0.1 is 100m, not a float.
    text = value if isinstance(value, str) else repr(value)
    nano = nano_cached(text)
    if nano is None:
        raise InvalidQuantity(f"{where}: invalid quantity {shown(value)}")
    if nano < 0:
        raise InvalidQuantity(f"{where}: quantity {shown(value)} must not be negative")
    return nano


def from_nano(resource: str, nano: int) -> int:
    """Nano units to the integer Kubernetes reports: cpu `MilliValue()`, others `Value()`, rounded up."""
    unit = MILLI_IN_NANO if resource == CPU else NANO
    return -(-nano // unit)


def parse_quantity(resource: str, value: str | int | float) -> int:
    """One quantity of `resource`: cpu in millicores, everything else in base units, rounded up."""
    return from_nano(resource, quantity_nano(value, resource))


def resource_list(obj: Any, key: str, path: str) -> dict[str, int]:
    """A ResourceList (`requests`, `limits`, `allocatable`, `overhead`) in nano units."""
    raw = field(obj, key, path)
    if not raw:
        return {}
    out: dict[str, int] = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise InvalidObject(f"{path}.{key}: resource name {shown(name)} must be a string")
        out[name] = quantity_nano(value, f"{path}.{key}.{shown_name(name)}")
    return out


def add_into(total: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if k not in total or v > total[k]:
            total[k] = v


def max_of(*lists: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for more in lists:
        max_into(out, more)
    return out


def spec_of(pod: Any) -> Mapping[str, Any]:
    if not isinstance(pod, dict):
        raise InvalidObject(f"pod: must be an object, got {type_name(pod)}")
    spec: Mapping[str, Any] = field(pod, "spec", "pod", default={})
    return spec
