"""`priority-webhook plan`: kube-scheduler preemption, offline, on a cluster snapshot or read live.

    kubectl get nodes,pods,pdb,pc -A -o json > cluster.json
    priority-webhook plan --cluster cluster.json --pod pod.yaml --classes classes.yaml
    priority-webhook plan --kubeconfig ~/.kube/config --pod pod.yaml

Either way the objects stream through `SnapshotBuilder`, which keeps compact records only.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from webhook.commands import dispatch
from webhook.commands.inputs import read_pod_input
from webhook.commands.options import add_classes, add_legacy_annotation, add_output
from webhook.commands.progress import Progress
from webhook.files.class_files import load_classes
from webhook.files.documents import InputError, dump
from webhook.files.snapshot_file import stream_objects
from webhook.objects.defaults import pod_to_create
from webhook.objects.names import invalid_pod
from webhook.policy.class_model import ClassSet, StaticClassStore
from webhook.policy.pod_rules import PodOptions
from webhook.preemption.cluster.filter import same_info
from webhook.preemption.cluster.planner import Plan, PlanOptions, plan
from webhook.preemption.cluster.priority import resolve_priority
from webhook.preemption.cluster.snapshot import (
    InvalidSnapshot,
    PodInfo,
    PriorityResolver,
    SnapshotBuilder,
    read_pod,
)
from webhook.preemption.resources import InvalidObject
from webhook.preemption.semantics import parse_version, semantics_of
from webhook.preemption.validate import check_pod


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "plan",
        description="Where kube-scheduler would nominate POD and which pods it would delete for it, from "
        "a snapshot (`kubectl get nodes,pods,pdb,pc -A -o json`) or listed from the cluster itself "
        "(read-only). Exit 0 iff a node was found.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster",
        action="append",
        metavar="FILE",
        help="snapshot: Nodes, Pods, PodDisruptionBudgets (and PriorityClasses); repeatable; - is stdin",
    )
    source.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="list the nodes, pods, PDBs and PriorityClasses from this cluster instead (read-only, paged)",
    )
    source.add_argument(
        "--in-cluster", action="store_true", help="as --kubeconfig, with the pod's service account"
    )
    parser.add_argument(
        "--pod",
        required=True,
        metavar="FILE",
        help="the pending pod: a Pod or a workload (its pod template); PriorityClasses in the file count "
        "as created first",
    )
    add_classes(parser)
    add_legacy_annotation(parser)
    parser.add_argument("--explain", action="store_true", help="say why each other node was not chosen")
    parser.add_argument(
        "--sample",
        action="store_true",
        help="examine only upstream's candidate sample (10%% of the nodes, at least 100) from a random "
        "offset, instead of every node",
    )
    parser.add_argument(
        "--offset",
        type=int,
        metavar="N",
        help="with --sample: start at potential node N (modulo their number), not at a random one",
    )
    add_output(parser)
    parser.set_defaults(run=run)


@contextmanager
def without_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a snapshot is read and indexed.

    A dump of a large cluster is millions of fresh dicts and lists with no reference cycles; the
    generational collector would traverse them again and again as they are created, which more than
    doubles the loading time and frees nothing. Reference counting still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and (not args.sample or args.offset < 0):
        raise InputError("--offset: needs --sample and a non-negative number")
    with without_gc():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        return _plan(args, progress)
    finally:
        progress.done()


def _plan(args: argparse.Namespace, progress: Progress) -> int:
    options = PodOptions(legacy_critical_annotation=args.legacy_critical_annotation)
    # Pods read now carry their own priority (admitted pods always do): the classes are not needed yet.
    builder = SnapshotBuilder(_resolver(StaticClassStore([]).snapshot(), options), classes_known=False)
    try:
        for source, obj in _objects(args, builder, progress):
            builder.add(source, obj)
    except InvalidSnapshot as err:
        raise InputError(str(err)) from None
    # Built-in system classes, then the snapshot's, then `--classes` files (a file wins on a name clash:
    # it is the what-if being asked), then the classes in the pod's own file.
    base = StaticClassStore([*builder.classes, *load_classes(args.classes)]).snapshot()
    given = read_pod_input(args.pod, base)
    pod_obj, source = given.pod, given.source
    try:
        check_pod(pod_obj)  # every field the filters read (tolerations, ports, ...): never fail mid-plan
    except InvalidObject as err:
        raise InputError(f"{source}: {err}") from None
    if invalid_pod(pod_obj):
        raise InputError(f"{source}: {invalid_pod(pod_obj)}")
    pod_obj = pod_to_create(pod_obj)  # API defaulting (requests from limits), generateName
    try:
        classes = given.classes
        preemptor = read_pod(pod_obj, source, -1, _resolver(classes, options, what_if=True))
        if preemptor is None:
            raise InputError(f"{source}: status.phase: the pod has already terminated")
        snapshot = builder.finish(_resolver(classes, options), exclude=lambda p: same_info(p, preemptor))
    except InvalidSnapshot as err:
        raise InputError(str(err)) from None
    # Upstream draws the offset for every attempt (`rand.Int31n`); --offset pins it.
    offset = random.randrange(2**31) if args.offset is None else args.offset

    def examined(done: int, total: int) -> None:
        progress.update(f"examining nodes: {done:,}/{total:,}")

    plan_options = PlanOptions(now=time.time(), sample=args.sample, offset=offset, progress=examined)
    try:
        result = plan(preemptor, snapshot, plan_options)
    except InvalidObject as err:  # a field of a snapshot pod read only by a filter: a safety net
        where = ", ".join(args.cluster) if args.cluster else "the cluster"
        raise InputError(f"{where}: a pod in the snapshot: {err}") from None
    progress.done()
    out = _output(result)
    if args.explain:
        out["explain"] = _explain(result)
    sys.stdout.write(dump(out, args.output))
    return 0 if result.node is not None else 1


def _objects(
    args: argparse.Namespace, builder: SnapshotBuilder, progress: Progress
) -> Iterator[tuple[str, Any]]:
    """The snapshot's objects: streamed from the files, or listed from the cluster."""
    if args.cluster:
        for path in args.cluster:
            name = "<stdin>" if path == "-" else path

            def read(done: int, total: int, name: str = name) -> None:
                size = f"{done / 2**20:,.0f}" + (f"/{total / 2**20:,.0f}" if total else "") + " MiB"
                progress.update(f"reading {name}: {size}, {_counts(builder)}")

            yield from stream_objects(path, read)
        return
    from webhook.kube.config import api_client  # the client is only imported when a cluster is asked
    from webhook.kube.listing import ListError, list_objects

    def listed(plural: str, count: int) -> None:
        progress.update(f"listing {plural}: {count:,}")

    from webhook.kube.version import server_version

    client = api_client(args.kubeconfig, args.in_cluster)
    version = server_version(client)  # the scheduler's version: the server's; unstated, the nodes'
    if parse_version(version) is not None:
        builder.set_semantics(semantics_of(version))
    try:
        yield from list_objects(client, listed)
    except ListError as err:
        raise InputError(str(err)) from None
    finally:
        client.close()


def _counts(builder: SnapshotBuilder) -> str:
    return f"{len(builder.nodes):,} nodes, {builder.pod_count:,} pods"


def _output(result: Plan) -> dict[str, Any]:
    """The command-line contract's object."""
    return {
        "node": result.node,
        "victims": [_pod_ref(p) for p in result.victims],
        "pdbViolations": result.pdb_violations,
        "nominatedPodsToClear": [_pod_ref(p) for p in result.nominated_to_clear],
        "message": result.message,
    }


def _explain(result: Plan) -> dict[str, Any]:
    """Why every other node is not the answer, and each candidate's victims."""
    return {
        "outcome": result.outcome,
        "summary": result.summary,
        "excluded": [{"node": name, "reason": why} for name, why in result.excluded.items()],
        "candidates": [
            {
                "node": c.node.name,
                "victims": [p.key for p in c.victims.pods],
                "pdbViolations": c.victims.pdb_violations,
            }
            for c in result.candidates
        ],
    }


def _resolver(classes: ClassSet, options: PodOptions, *, what_if: bool = False) -> PriorityResolver:
    def resolve(pod: Any, namespace: str) -> tuple[int, str]:
        return resolve_priority(pod, namespace, classes, options, what_if=what_if)

    return resolve


def _pod_ref(pod: PodInfo) -> dict[str, Any]:
    return {"namespace": pod.namespace, "name": pod.name, "priority": pod.priority}
