"""`priority-webhook sidecar --node NAME`: the per-node agent that makes room for rejected critical pods."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from webhook.commands import dispatch
from webhook.commands.options import add_cluster, add_log_level, parse_bind
from webhook.files import InputError
from webhook.k8s import INT32_MAX, SYSTEM_CRITICAL_PRIORITY

DEFAULT_BIND = "0.0.0.0:9090"
DEFAULT_EVICTIONS_PER_MINUTE = 30


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "sidecar",
        description="Watch this node's pods; when the kubelet rejects a critical pod for lack of resources, "
        "evict the victims chosen by the node-side preemption module through the Eviction API.",
    )
    parser.add_argument("--node", required=True, metavar="NAME", help="this node's name (downward API)")
    add_cluster(parser)
    parser.add_argument("--dry-run", action="store_true", help="evict nothing; report what would be done")
    parser.add_argument(
        "--critical-priority",
        type=int,
        default=SYSTEM_CRITICAL_PRIORITY,
        metavar="N",
        help="pods at or above this priority are critical (default %(default)s, as the kubelet)",
    )
    parser.add_argument(
        "--order",
        choices=("qos", "priority"),
        default="priority",
        help="victim order: priority, then QoS (default), or QoS only (upstream kubelet)",
    )
    parser.add_argument(
        "--ignore-pdb",
        action="store_true",
        help="delete victims with their own grace period instead of the PDB-honouring Eviction API",
    )
    parser.add_argument(
        "--recreate-rejected",
        action="store_true",
        help="once room is made, delete a controller-owned rejected pod so it is replaced at once",
    )
    parser.add_argument(
        "--bind",
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"/healthz, /readyz, /metrics over plain HTTP (default {DEFAULT_BIND})",
    )
    parser.add_argument(
        "--max-evictions-per-minute",
        type=int,
        default=DEFAULT_EVICTIONS_PER_MINUTE,
        metavar="N",
        help=f"at most N evictions in any 60 seconds (default {DEFAULT_EVICTIONS_PER_MINUTE})",
    )
    add_log_level(parser)
    parser.set_defaults(run=run)


def check_bind(value: str) -> tuple[str, int]:
    """(host, port) by the shared rules; port 0 is allowed here (the sidecar logs the port it got)."""
    try:
        return parse_bind(value, min_port=0)
    except ValueError:
        raise InputError(f"--bind {value!r}: must be HOST:PORT with a port from 0 to 65535") from None


def run(args: argparse.Namespace) -> int:
    from webhook.kube.config import api_client
    from webhook.sidecar import metrics
    from webhook.sidecar.actions import Settings
    from webhook.sidecar.agent import Sidecar
    from webhook.sidecar.observe import ObservabilityServer

    if not args.node.strip():
        raise InputError("--node: must not be empty")
    if not 0 <= args.critical_priority <= INT32_MAX:
        raise InputError(f"--critical-priority {args.critical_priority}: must be from 0 to {INT32_MAX}")
    if args.max_evictions_per_minute < 1:
        raise InputError(f"--max-evictions-per-minute {args.max_evictions_per_minute}: must be at least 1")
    host, port = check_bind(args.bind)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    client = api_client(args.kubeconfig, args.in_cluster)
    settings = Settings(
        node_name=args.node,
        critical_priority=args.critical_priority,
        order=args.order,
        dry_run=args.dry_run,
        recreate_rejected=args.recreate_rejected,
    )
    agent = Sidecar(
        client, settings, ignore_pdb=args.ignore_pdb, max_evictions_per_minute=args.max_evictions_per_minute
    )
    try:
        server = ObservabilityServer(
            host,
            port,
            ready=lambda: agent.ready,
            before_scrape=lambda: metrics.SYNC_AGE.set(agent.seconds_since_last_sync()),
        )
    except OSError as err:
        raise InputError(f"--bind {args.bind}: cannot listen: {err.strerror or err}") from None
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        logging.getLogger("webhook.sidecar").info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    agent.start()
    log = logging.getLogger("webhook.sidecar")
    log.info(
        "sidecar for node %s serving health and metrics on %s:%d (dry-run=%s, order=%s, "
        "critical-priority=%d)",
        args.node,
        host,
        server.port,
        args.dry_run,
        args.order,
        args.critical_priority,
    )
    stop.wait()
    agent.stop()
    server.stop()
    log.info("stopped")
    return 0
