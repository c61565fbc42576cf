"""The break-glass commands in NOTES.txt and the operations guide name the configurations the chart really renders."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python as helm

from testkit.chart_rendering import FULLNAME, Rendered, render

ROOT = Path(__file__).resolve().parents[2]
KINDS = {
    "mutatingwebhookconfiguration": "MutatingWebhookConfiguration",
    "validatingwebhookconfiguration": "ValidatingWebhookConfiguration",
}


def delete_commands(text: str) -> dict[str, str]:
    found = re.findall(
        r"kubectl delete (mutatingwebhookconfiguration|validatingwebhookconfiguration) (\S+)", text
    )
    return dict(found)


def test_notes_name_the_rendered_configurations(rendered: Callable[[dict[str, Any]], Rendered]) -> None:
    r = rendered({})
    commands = delete_commands(r.notes)
    assert set(commands) == set(KINDS)
    for resource, name in commands.items():
        assert r.one(KINDS[resource])["metadata"]["name"] == name == FULLNAME


def test_notes_show_the_certificate_expiry(rendered: Callable[[dict[str, Any]], Rendered]) -> None:
    r = rendered({"certificates": {"mode": "generated"}})
    expiry = r.one("Secret")["metadata"]["annotations"]["priority-webhook.io/not-after"]
    assert f"expires {expiry}" in r.notes


def test_readme_break_glass_matches_the_documented_install(chart: helm.Chart) -> None:
    """The operations guide installs release `priority-webhook` into `priority-system`; its commands must fit."""
    section = (ROOT / "docs" / "operations.md").read_text()
    assert "helm install priority-webhook charts/priority-webhook -n priority-system" in section
    r = render(chart, {}, namespace="priority-system", release="priority-webhook")
    commands = delete_commands(section)
    assert set(commands) == set(KINDS)
    for resource, name in commands.items():
        assert r.one(KINDS[resource])["metadata"]["name"] == name
