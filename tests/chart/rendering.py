"""Render the chart with the real Helm engine (helm-python-sdk wraps Helm's Go SDK) into parsed objects."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "priority-webhook"
RELEASE = "pw"
NAMESPACE = "priority-system"
FULLNAME = "pw-priority-webhook"
KUBE_VERSION = "1.30"


class UniqueKeyLoader(yaml.SafeLoader):
    """Rejects a key given twice in one mapping, as the API server's strict decoding (and kubectl) do."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key_node, deep=deep) for key_node, _ in node.value]
        duplicates = {key for key in keys if keys.count(key) > 1}
        if duplicates:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate keys {sorted(duplicates)}", node.start_mark
            )
        return super().construct_mapping(node, deep=deep)


@dataclass
class Rendered:
    """Every object one render produced, plus NOTES.txt, with lookups by kind and name."""

    objects: list[dict[str, Any]]
    notes: str
    sources: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [obj for obj in self.of_kind(kind) if name is None or obj["metadata"]["name"] == name]
        assert len(found) == 1, (
            f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
        )
        return found[0]

    def kinds(self) -> set[str]:
        return {obj["kind"] for obj in self.objects}


def render(
    chart: helm.Chart,
    values: dict[str, Any] | None = None,
    *,
    namespace: str = NAMESPACE,
    release: str = RELEASE,
) -> Rendered:
    manifests = chart.render(values or {}, name=release, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    notes = ""
    sources: dict[str, str] = {}
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        for doc in yaml.load_all(text, Loader=UniqueKeyLoader):
            if doc:
                objects.append(doc)
                sources[f"{doc['kind']}/{doc['metadata']['name']}"] = path
    return Rendered(objects, notes, sources)


def values_key(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)
