"""Strict JSON schemas for the custom resources the chart renders, which kubernetes-validate has no schema for.

They cover only the fields the chart uses, named as in the upstream CRDs (cert-manager.io/v1,
monitoring.coreos.com/v1), with no other field allowed: a misspelt field fails here as it would be
pruned or rejected by the API server.
"""

from __future__ import annotations

from typing import Any

import jsonschema


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


_STR = {"type": "string", "minLength": 1}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = _obj(
    {"name": _STR, "namespace": _STR, "labels": _LABELS, "annotations": _LABELS}, ["name", "namespace"]
)
_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"}
_ISSUER_REF = _obj({"name": _STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]}, "group": _STR}, ["name"])
_SELECTOR = _obj({"matchLabels": _LABELS})
_NS_SELECTOR = _obj({"matchNames": {"type": "array", "items": _STR}})
_SECRET_KEY = _obj({"name": _STR, "key": _STR}, ["key"])


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": _METADATA, "spec": spec},
        ["apiVersion", "kind", "metadata", "spec"],
    )


SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("cert-manager.io/v1", "Issuer"): _resource(
        "cert-manager.io/v1",
        "Issuer",
        {
            "type": "object",
            "properties": {"selfSigned": _obj({}), "ca": _obj({"secretName": _STR}, ["secretName"])},
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": False,
        },
    ),
    ("cert-manager.io/v1", "Certificate"): _resource(
        "cert-manager.io/v1",
        "Certificate",
        _obj(
            {
                "secretName": _STR,
                "commonName": _STR,
                "dnsNames": {"type": "array", "items": _STR, "minItems": 1},
                "isCA": {"type": "boolean"},
                "duration": _DURATION,
                "renewBefore": _DURATION,
                "privateKey": _obj(
                    {
                        "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                        "size": {"type": "integer"},
                        "rotationPolicy": {"enum": ["Never", "Always"]},
                    }
                ),
                "usages": {
                    "type": "array",
                    "items": {
                        "enum": ["server auth", "client auth", "digital signature", "key encipherment"]
                    },
                },
                "issuerRef": _ISSUER_REF,
            },
            ["secretName", "issuerRef"],
        ),
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _resource(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        _obj(
            {
                "selector": _SELECTOR,
                "namespaceSelector": _NS_SELECTOR,
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": _obj(
                        {
                            "port": _STR,
                            "scheme": {"enum": ["http", "https"]},
                            "path": _STR,
                            "interval": _STR,
                            "scrapeTimeout": _STR,
                            "tlsConfig": _obj(
                                {
                                    "serverName": _STR,
                                    "ca": _obj({"secret": _SECRET_KEY, "configMap": _SECRET_KEY}),
                                    "insecureSkipVerify": {"type": "boolean"},
                                }
                            ),
                        },
                        ["port"],
                    ),
                },
            },
            ["selector", "endpoints"],
        ),
    ),
    ("monitoring.coreos.com/v1", "PodMonitor"): _resource(
        "monitoring.coreos.com/v1",
        "PodMonitor",
        _obj(
            {
                "selector": _SELECTOR,
                "namespaceSelector": _NS_SELECTOR,
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": _obj(
                        {"port": _STR, "path": _STR, "interval": _STR, "scrapeTimeout": _STR}, ["port"]
                    ),
                },
            },
            ["selector", "podMetricsEndpoints"],
        ),
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _resource(
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        _obj(
            {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": _obj(
                        {
                            "name": _STR,
                            "rules": {
                                "type": "array",
                                "minItems": 1,
                                "items": _obj(
                                    {
                                        "alert": _STR,
                                        "expr": _STR,
                                        "for": _DURATION,
                                        "labels": _LABELS,
                                        "annotations": _LABELS,
                                    },
                                    ["alert", "expr"],
                                ),
                            },
                        },
                        ["name", "rules"],
                    ),
                }
            },
            ["groups"],
        ),
    ),
}


def validate_custom(obj: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if `obj` has a field the chart's subset does not know."""
    schema = SCHEMAS.get((obj["apiVersion"], obj["kind"]))
    assert schema is not None, f"no schema for custom resource {obj['apiVersion']} {obj['kind']}"
    jsonschema.validate(obj, schema)
