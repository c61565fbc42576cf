"""Named values sets: the default, each certificate mode, and each option the chart offers."""

from __future__ import annotations

import base64
from typing import Any

from webhook.files import tls


def self_signed_ca_pem(common_name: str) -> bytes:
    """A throwaway CA certificate, standing in for one an operator brings."""
    return tls.create_ca(common_name, days=30).cert_pem()


# An operator's bundle during a rotation: the old and the new CA.
PROVIDED_BUNDLE = base64.b64encode(self_signed_ca_pem("old-ca") + self_signed_ca_pem("new-ca")).decode()

SIDECAR_ALL: dict[str, Any] = {"sidecar": {"enabled": True}}

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "generated": {"certificates": {"mode": "generated"}},
    "cert-manager": {"certificates": {"mode": "certManager"}},
    "cert-manager-issuer": {
        "certificates": {
            "mode": "certManager",
            "certManager": {"issuerRef": {"name": "corporate-ca", "kind": "ClusterIssuer"}},
        }
    },
    "provided": {
        "certificates": {
            "mode": "provided",
            "provided": {"secretName": "my-webhook-tls", "caBundle": PROVIDED_BUNDLE},
        }
    },
    "sidecar": SIDECAR_ALL,
    "pod-groups": {"admission": {"podGroups": {"enabled": True}}},
    "sidecar-ignore-pdb": {
        "sidecar": {
            "enabled": True,
            "ignorePdb": True,
            "dryRun": True,
            "criticalPriority": 1000000,
            "order": "priority",
            "maxEvictionsPerMinute": 5,
            "logLevel": "debug",
        }
    },
    "sidecar-recreate-rejected": {"sidecar": {"enabled": True, "recreateRejected": True}},
    "observability": {
        "sidecar": {"enabled": True},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "networkPolicy": {
            "enabled": True,
            "apiServer": {"ports": [6443], "cidrs": ["10.0.0.1/32"]},
            "webhookIngressFrom": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
        },
        "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
    },
    "portable": {
        "webhook": {
            "hostNetwork": True,
            "port": 9443,
            "nodeSelector": {"pool": "system"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "type", "operator": "NotIn", "values": ["virtual-kubelet"]}
                                ]
                            }
                        ]
                    }
                }
            },
            "extraArgs": ["--access-log"],
            "extraEnv": [{"name": "HTTPS_PROXY", "value": ""}],
            "podDisruptionBudget": {"minAvailable": 1, "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
        },
        "sidecar": {
            "nodeSelector": {"kubernetes.io/os": ""},
            "extraArgs": ["--max-evictions-per-minute=3"],
            "extraEnv": [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
            "affinity": {"podAntiAffinity": {}},
        },
        "admission": {"annotations": {"admissions.enforcer/disabled": "true"}},
        "systemPriorityQuota": {"enabled": True, "pods": 500},
    },
    "alerts": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prometheus"},
            "certificateExpiryWarningDays": 30,
        },
    },
    "no-install-gate": {"admission": {"installGate": {"enabled": False}}, "sidecar": {"enabled": False}},
    "kubernetes-1.24": {"kubeVersionOverride": "1.24.0"},
    "fail-open-and-tuned": {
        "admission": {
            "failurePolicy": "Ignore",
            "priorityClassFailurePolicy": "Ignore",
            "timeoutSeconds": 2,
            "systemNamespaces": ["kube-system", "kube-node-lease"],
            "excludedNamespaces": ["sandbox"],
        },
        "webhook": {
            "replicas": 3,
            "antiAffinity": "required",
            "legacyCriticalAnnotation": False,
            "logLevel": "warning",
            "preStopSleepSeconds": 0,
            "podLabels": {"team": "platform", "app.kubernetes.io/component": "not-the-webhook"},
        },
        "image": {"repository": "registry.example/priority-webhook", "digest": "sha256:" + "ab" * 32},
    },
}
