"""`priority-webhook victims`: the kubelet's critical-pod admission of one pod on one node.

Offline, from files:
    kubectl get node NODE -o json > node.json
    kubectl get pods -A --field-selector spec.nodeName=NODE -o json > pods.json
    priority-webhook victims --node node.json --pods pods.json --pod pod.yaml
Live, without --pods (the node and its pods read through the kubeconfig):
    priority-webhook victims --node NODE --pod pod.yaml [--kubeconfig F] [--context C]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from webhook.commands import dispatch
from webhook.commands.inputs import base_classes, read_pod_input, with_priority
from webhook.commands.options import add_classes, add_context, add_legacy_annotation, add_output
from webhook.files.documents import InputError, dump, load_objects, load_one
from webhook.k8s import SYSTEM_CRITICAL_PRIORITY, pod_ref
from webhook.objects.defaults import default_pod
from webhook.objects.names import invalid_pod
from webhook.policy.pod_rules import PodOptions
from webhook.preemption.node.admission import Admission, admit_to_node
from webhook.preemption.node.victim_search import ORDER_QOS, ORDERS
from webhook.preemption.pods import describe
from webhook.preemption.resources import InvalidObject
from webhook.preemption.semantics import node_semantics
from webhook.preemption.validate import check_node, check_pod


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "victims",
        description="Would the kubelet on NODE admit POD next to PODS? A critical pod that does not fit "
        "for lack of resources is admitted after evicting victims (printed in eviction order). "
        "Exit 0 iff the pod is admitted.",
    )
    parser.add_argument(
        "--node",
        required=True,
        metavar="FILE|NAME",
        help="the Node (kubectl get node X -o json); without --pods, the name of a node read live (with "
        "the cluster's PriorityClasses)",
    )
    parser.add_argument(
        "--pods",
        metavar="FILE",
        help="pods bound to the node, any phase "
        "(kubectl get pods -A --field-selector spec.nodeName=X -o json); omitted: read live with the node",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="without --pods: kubeconfig of the cluster")
    add_context(parser)
    parser.add_argument(
        "--pod",
        required=True,
        metavar="FILE",
        help="the pod to admit: a Pod or a workload (its pod template); PriorityClasses in the file count "
        "as created first",
    )
    add_classes(parser)
    add_legacy_annotation(parser)
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default=ORDER_QOS,
        help="victim order: qos (upstream kubelet: QoS class only) or priority (lowest priority first, "
        "QoS within one priority; never a pod of equal or higher priority)",
    )
    parser.add_argument(
        "--critical-priority",
        type=int,
        default=SYSTEM_CRITICAL_PRIORITY,
        metavar="N",
        help=f"priority from which a pod is critical (default {SYSTEM_CRITICAL_PRIORITY})",
    )
    add_output(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    live_classes: list[Any] = []
    if args.pods is None:
        node, listed, live_classes = _live(args)
        objects = [(f"node {args.node}: pod {i + 1}", p) for i, p in enumerate(listed)]
        node_source = f"node {args.node}"
    else:
        if args.kubeconfig or args.context:
            raise InputError("--kubeconfig/--context: only without --pods (the node is then read live)")
        node, node_source = load_one(args.node, "Node"), args.node
        objects = load_objects([args.pods])
    _check(check_node, node, node_source)
    options = PodOptions(legacy_critical_annotation=args.legacy_critical_annotation)
    given = read_pod_input(args.pod, base_classes(args.classes, live_classes))
    pods: list[Any] = []
    for source, doc in objects:
        _check(check_pod, doc, source)
        pods.append(with_priority(default_pod(doc), source, given.classes, options))
    pod = given.pod
    _check(check_pod, pod, given.source)
    invalid = invalid_pod(pod)
    if invalid:
        raise InputError(f"{given.source}: {invalid}")
    # The priority admission gives it (from its class) before the kubelet ever sees the pod.
    pod = with_priority(default_pod(pod), given.source, given.classes, options)
    try:
        admission = admit_to_node(
            pod,
            node,
            pods,
            order=args.order,
            critical_priority=args.critical_priority,
            semantics=node_semantics(node),  # the kubelet's version (status.nodeInfo.kubeletVersion)
        )
    except InvalidObject as err:  # every field was read above; this is a safety net, not a path
        raise InputError(f"{args.pods}: {err}") from None
    sys.stdout.write(dump(result(admission), args.output))
    return 0 if admission.admit else 1


def _live(args: argparse.Namespace) -> tuple[Any, list[Any], list[Any]]:
    """(node, its pods, the cluster's PriorityClasses) read through the kubeconfig."""
    from webhook.kube.config import api_client  # the kubernetes client only where a cluster is read
    from webhook.kube.nodeview import read_node_view, read_priority_classes

    with api_client(args.kubeconfig, False, args.context) as client:
        node, pods = read_node_view(client, args.node)
        return node, pods, read_priority_classes(client)


def _check(check: Any, obj: Any, source: str) -> None:
    try:
        check(obj)
    except InvalidObject as err:
        named = isinstance(obj, dict) and any(pod_ref(obj)[:2])
        who = f" ({describe(obj)})" if named else ""
        raise InputError(f"{source}{who}: {err}") from None


def result(admission: Admission) -> dict[str, Any]:
    """The contract's JSON object: admit, fits, reasons, victims (eviction order), error."""
    return {
        "admit": admission.admit,
        "fits": admission.fits,
        "reasons": [r.as_dict() for r in admission.reasons],
        "victims": admission.victims,
        "error": admission.error,
    }
