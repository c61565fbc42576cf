"""Options shared by several commands."""

from __future__ import annotations

import argparse


def add_output(parser: argparse.ArgumentParser, default: str = "json") -> None:
    parser.add_argument("-o", "--output", choices=("json", "yaml"), default=default, help="output format")


def add_classes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--classes",
        action="append",
        default=[],
        metavar="FILE",
        help="PriorityClass file (YAML/JSON, several documents or a v1 List); repeatable",
    )


def add_legacy_annotation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-legacy-critical-annotation",
        dest="legacy_critical_annotation",
        action="store_false",
        help='do not map scheduler.alpha.kubernetes.io/critical-pod: "" in kube-system to '
        "system-cluster-critical",
    )


def add_cluster(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig of the cluster to read from")
    group.add_argument("--in-cluster", action="store_true", help="use the pod's service account")


def add_context(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--context", metavar="NAME", help="kubeconfig context to use (default: the current one)"
    )
