"""Quantities as the API server decodes them (webhook/objects/validation.py), and what the commands say
about one it cannot decode. tests/e2e/test_quantities.py holds the same table against a real API server."""

from __future__ import annotations

import pytest
import yaml

from webhook.cli import main
from webhook.objects.validation import FORMAT_WRONG, SUFFIX_WRONG, pod_spec_quantity_error, quantity_error

# value -> the decoder's error (None: decodes). From apimachinery's ParseQuantity and its tests.
QUANTITIES = [
    ("{{cpurequest}}", FORMAT_WRONG),
    ("1.5.3", FORMAT_WRONG),
    ("10Q", FORMAT_WRONG),
    ("", FORMAT_WRONG),
    ("lots", FORMAT_WRONG),
    ("1e", SUFFIX_WRONG),
    ("1i", SUFFIX_WRONG),
    ("1e99999999999999999999", SUFFIX_WRONG),
    ("0", None),
    ("0.5", None),
    ("1.", None),
    (".5", None),
    ("+5", None),
    ("-1", None),  # decodes; validation refuses a negative request later
    ("1e3", None),
    ("1E+3", None),
    ("100m", None),
    ("1Gi", None),
    (" 2 ", None),
    (9, None),
    (0.1, None),
    (True, FORMAT_WRONG),
]


@pytest.mark.parametrize(("value", "error"), QUANTITIES, ids=[repr(v) for v, _ in QUANTITIES])
def test_quantities_decode_as_the_api_server_decodes_them(value, error):
    assert quantity_error(value) == error


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": [{"name": "c", "resources": {"requests": {"cpu": "{{cpurequest}}"}}}]},
        {"initContainers": [{"name": "c", "resources": {"limits": {"memory": "1.5.3"}}}]},
        {"resources": {"limits": {"cpu": "x1"}}},
        {"overhead": {"cpu": "1.1.1"}},
        {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Q"}}]},
    ],
)
def test_every_quantity_of_a_pod_spec_is_read(spec):
    assert pod_spec_quantity_error(spec) is not None


HELM_VALUE = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "{{cpurequest}}"}}}
                ]
            }
        }
    },
}


def test_review_refuses_an_undecodable_quantity_as_the_api_server_does(tmp_path, capsys):
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(HELM_VALUE))
    assert main(["review", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        'Error from server (BadRequest): Deployment in version "v1" cannot be handled as a Deployment: '
        f"{FORMAT_WRONG}\n"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "kind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n",
            "line 3: {{ .Release.Name }}: an unrendered template",
        ),
        (
            "{{- if .Values.x }}\nkind: Pod\n{{- end }}\n",
            "line 1: {{- if .Values.x }}: an unrendered template",
        ),
        ("kind: Pod\n---\nkind: Pod\nmetadata: [\n", "document 2: not valid YAML or JSON"),
    ],
)
def test_templates_and_parse_errors_say_what_and_where(tmp_path, capsys, text, error):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    assert main(["review", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"priority-webhook review: error: {path}: {error}")
