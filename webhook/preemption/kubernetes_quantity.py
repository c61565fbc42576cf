"""`kubernetes.utils.parse_quantity`, loaded without the kubernetes client package.

The package's `__init__` imports the whole API client (about 0.4 s, ten times what `review` and `victims`
take to start, and about 35 MiB in every sidecar), and `kubernetes/utils/quantity.py` needs only
`decimal`. So this module, beside the quantities it parses, finds the installed package without importing
it and imports that one file by its path as a module of its own, unless the package is loaded anyway.
The parser stays the client's: one well-kept implementation of apimachinery's quantity grammar, the same
one the client uses.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from decimal import Decimal


def _load() -> Callable[[str], Decimal]:
    loaded = sys.modules.get("kubernetes.utils")
    if loaded is not None:
        return loaded.parse_quantity  # type: ignore[no-any-return]
    package = importlib.util.find_spec("kubernetes")  # finds the package without importing it
    if package is None or not package.submodule_search_locations:
        raise ImportError("the kubernetes package is not installed")
    path = f"{package.submodule_search_locations[0]}/utils/quantity.py"
    spec = importlib.util.spec_from_file_location("webhook.preemption._kubernetes_utils_quantity", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not loadable")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_quantity  # type: ignore[no-any-return]


parse_quantity = _load()
