"""`priority-webhook review`: the admission decision offline, through the server's own code path."""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import jsonpatch

from webhook.classfiles import static_store
from webhook.commands.options import add_classes, add_legacy_annotation, add_output
from webhook.documents import InputError, dump, load_objects
from webhook.policy.classes import ClassSet
from webhook.policy.pods import PodOptions
from webhook.review import MalformedReview, Stage, handle_review

# kind → (group, version, resource) as the API server names it in a review.
OBJECT_KINDS = {
    "Pod": ("", "v1", "pods"),
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses"),
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "review",
        help="run the admission decision offline",
        description="AdmissionReview in: the response the server would send. Pod or PriorityClass in: "
        "treated as a CREATE and printed mutated; a denial goes to stderr and the exit code is 1.",
    )
    parser.add_argument("files", nargs="*", default=["-"], metavar="FILE", help="input files; - is stdin")
    add_classes(parser)
    parser.add_argument("-n", "--namespace", help="namespace for objects that name none (default: default)")
    parser.add_argument(
        "--stage",
        choices=[s.value for s in Stage],
        default=Stage.ADMIT.value,
        help="mutate or validate: one webhook endpoint; admit (default): both, as the cluster runs them",
    )
    add_legacy_annotation(parser)
    add_output(parser, default="yaml")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    classes = static_store(args.classes).snapshot()
    options = PodOptions(legacy_critical_annotation=args.legacy_critical_annotation)
    stage = Stage(args.stage)
    outputs: list[Any] = []
    denied = False
    for source, doc in load_objects(args.files):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if not isinstance(kind, str):  # also keeps unhashable kinds (lists, maps) out of the lookups below
            kind = None if kind is None else repr(kind)
        if kind == "AdmissionReview":
            outputs.append(_review(source, doc, stage, classes, options))
        elif kind in OBJECT_KINDS:
            result = _object(source, doc, args.namespace, stage, classes, options)
            if result is None:
                denied = True
            else:
                outputs.append(result)
        else:
            shown = kind if kind is None or len(kind) <= 64 else kind[:64] + "..."  # one short line
            raise InputError(f"{source}: kind {shown!r} is not an AdmissionReview, Pod or PriorityClass")
    if len(outputs) == 1:
        sys.stdout.write(dump(outputs[0], args.output))
    elif outputs:
        sys.stdout.write(dump({"apiVersion": "v1", "kind": "List", "items": outputs}, args.output))
    return 1 if denied else 0


def _review(source: str, doc: dict[str, Any], stage: Stage, classes: ClassSet, options: PodOptions) -> Any:
    try:
        response, _, _ = handle_review(doc, stage, classes, options)
    except MalformedReview as err:
        raise InputError(f"{source}: {err}") from None
    return response


def _object(
    source: str,
    obj: dict[str, Any],
    namespace: str | None,
    stage: Stage,
    classes: ClassSet,
    options: PodOptions,
) -> dict[str, Any] | None:
    """A CREATE of `obj`, as `kubectl create` would send it; the mutated object, or None if denied."""
    group, version, resource = OBJECT_KINDS[obj["kind"]]
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": "CREATE",
        # A non-string name is left for the object's own schema to report as metadata.name.
        "name": meta.get("name") if isinstance(meta.get("name"), str) else "",
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }
    if resource == "pods":
        own = meta.get("namespace")
        if not isinstance(own, str):
            own = None  # reported by the object's schema as metadata.namespace
        if own and namespace and own != namespace:
            raise InputError(
                f'{source}: the namespace from the provided object "{own}" does not match '
                f'the namespace "{namespace}"'
            )
        request["namespace"] = own or namespace or "default"
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    try:
        _, _, decision = handle_review(review, stage, classes, options)
    except MalformedReview as err:
        raise InputError(f"{source}: {str(err).removeprefix('request.object.')}") from None
    for warning in decision.warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    if not decision.allowed:
        print(f"Error from server ({decision.reason}): {decision.message}", file=sys.stderr)
        return None
    return jsonpatch.apply_patch(obj, list(decision.patch)) if decision.patch else obj
