"""The API server's own admission-webhook series, read from its /metrics as Prometheus stores them: what a
test asserts about which webhook entries the API server called, and with what result.

    before = scrape(cluster)
    ...
    grown(before, scrape(cluster), "apiserver_admission_webhook_request_total",
          [("name", "=", "pods.priority-webhook.io"), ("code", "=", "200")])
"""

from __future__ import annotations

import re

from testkit.envtest import ControlPlane

# (series name, its labels) -> value
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# A label matcher as PromQL writes one: (label, operator =, !=, =~ or !~, value).
Matcher = tuple[str, str, str]
# One exposition line, read as Prometheus stores it (sample names as written: no suffix added).
LINE = re.compile(r"^(apiserver_admission_webhook_\w+)\{(.*)\} (\S+)$", re.MULTILINE)
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(cluster: ControlPlane) -> Samples:
    """The API server's `apiserver_admission_webhook_*` samples, now."""
    response = cluster.get("/metrics")
    response.raise_for_status()
    samples: Samples = {}
    for name, labels, value in LINE.findall(response.text):
        samples[(name, frozenset(LABEL.findall(labels)))] = float(value)
    return samples


def matches(labels: frozenset[tuple[str, str]], matchers: list[Matcher]) -> bool:
    have = dict(labels)
    for label, op, value in matchers:
        actual = have.get(label, "")
        ok = {
            "=": actual == value,
            "!=": actual != value,
            "=~": re.fullmatch(value, actual) is not None,
            "!~": re.fullmatch(value, actual) is None,
        }[op]
        if not ok:
            return False
    return True


def selected(samples: Samples, name: str, matchers: list[Matcher]) -> Samples:
    return {key: v for key, v in samples.items() if key[0] == name and matches(key[1], matchers)}


def grown(before: Samples, after: Samples, name: str, matchers: list[Matcher]) -> Samples:
    """The samples of `name` that `matchers` select and that grew from `before` to `after`, by how much."""
    return {
        key: value - before.get(key, 0.0)
        for key, value in selected(after, name, matchers).items()
        if value > before.get(key, 0.0)
    }
