"""Options shared by several commands."""

from __future__ import annotations

import argparse
import ipaddress
import re


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


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info", help="default: info"
    )


def add_context(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--context", metavar="NAME", help="kubeconfig context to use (default: the current one)"
    )


_PORT = re.compile(r"[0-9]{1,5}")


def parse_bind(value: str, *, min_port: int = 1) -> tuple[str, int]:
    """`HOST:PORT` or `[IPv6]:PORT` as (host, port), the host without brackets; ValueError says why not.

    One set of rules for every listening flag: a host is required (an empty one would silently mean every
    interface), an IPv6 address must be bracketed and valid, the port is ASCII digits in
    `min_port`..65535 (0 asks the kernel for a free port, which only a server that reports it can use).
    """
    host, sep, port = value.rpartition(":")
    if not sep:
        raise ValueError("no port")
    if not _PORT.fullmatch(port) or not min_port <= int(port) <= 65535:
        raise ValueError(f"port {port!r} out of range")
    if host.startswith("[") and host.endswith("]"):
        try:
            host = str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise ValueError(f"{host} is not an IPv6 address") from None
    elif not host or ":" in host or "[" in host or "]" in host or not host.isprintable() or " " in host:
        raise ValueError(f"host {host!r} is not a host name or address (IPv6 goes in brackets)")
    return host, int(port)


# argparse types: a bad value is a one-line usage error naming the option.


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def seconds(text: str) -> float:
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value
