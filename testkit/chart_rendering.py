"""Render the chart with the real Helm engine (helm-python-sdk wraps Helm's Go SDK) into parsed objects."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "priority-webhook"
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

    def installed(self) -> list[dict[str, Any]]:
        """What Helm applies before any hook runs (the release's own resources)."""
        return [obj for obj in self.objects if not hook_events(obj)]

    def hooks(self, event: str) -> list[dict[str, Any]]:
        """The hook objects of one event, in the order Helm runs them (weight, then kind and name)."""
        found = [obj for obj in self.objects if event in hook_events(obj)]
        return sorted(found, key=lambda o: (hook_weight(o), o["kind"], o["metadata"]["name"]))


def hook_events(obj: dict[str, Any]) -> list[str]:
    value = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook", "")
    return [event.strip() for event in value.split(",") if event.strip()]


def hook_weight(obj: dict[str, Any]) -> int:
    return int((obj["metadata"].get("annotations") or {}).get("helm.sh/hook-weight", "0"))


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


def template(chart: helm.Chart, *, release: str = "release-name", namespace: str = "default") -> str:
    """What `helm template RELEASE CHART -n NAMESPACE` prints (Helm's defaults for both): every manifest the
    chart renders, hooks and tests included, NOTES.txt not, each headed by the template it came from."""
    manifests = chart.render({}, name=release, namespace=namespace, is_install=True)
    return "".join(
        f"---\n# Source: {path}\n{text.strip()}\n"
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt") and text.strip()
    )
