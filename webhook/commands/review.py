"""`priority-webhook review`: the admission decision offline, through the server's own code path.

Takes manifests as users keep them: every kind, several documents, Lists. A Pod, PriorityClass or
(scheduling.k8s.io) PodGroup is defaulted and validated as the API server would (webhook.objects) and
admitted as a CREATE; a workload's
pod template gets the decision its pods will get; any other kind passes through unchanged. Namespace
documents also give their labels to the classes' allowed-namespaces rules.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from webhook.commands import dispatch
from webhook.commands.inputs import kubectl_error
from webhook.commands.options import add_classes, add_legacy_annotation, add_output
from webhook.files.class_files import static_store
from webhook.files.documents import InputError, dump, load_objects
from webhook.k8s import CREATE, section
from webhook.objects.defaults import default_pod, default_priority_class
from webhook.objects.names import invalid_object
from webhook.objects.validation import undecodable
from webhook.objects.workloads import WORKLOADS, pod_template, template_path, template_pod, with_template
from webhook.policy.class_model import ClassSet, PriorityClass
from webhook.policy.pod_rules import PodOptions
from webhook.review import MalformedReview, Stage, handle_review
from webhook.review.routes import BY_KIND, Route
from webhook.review.workload_check import workload_message

# The kinds admitted as objects (a CREATE of the document itself), with the API server's defaulting.
OBJECT_KINDS: dict[str, Route] = {kind: BY_KIND[kind] for kind in ("Pod", "PriorityClass", "PodGroup")}
DEFAULTS = {"Pod": default_pod, "PriorityClass": default_priority_class}
SHORT_KIND = 64  # a kind quoted in an error is cut to this many characters


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "review",
        description="Manifests in (any kind, several documents, Lists): AdmissionReviews get the response "
        "the server would send; Pods, PriorityClasses and PodGroups are treated as a CREATE and printed as "
        "stored; "
        "workloads (Deployment, Job, ...) are printed with the priority their pods will get; other kinds "
        "pass through. Namespace documents give the labels that PriorityClasses' allowed-namespaces rules "
        "read. A denial goes to stderr and the exit code is 1; a rule that needs the labels of a namespace "
        "the input does not describe exits 2.",
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


# The label the API server sets on every namespace (its name); a Namespace document gets it as stored.
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass
class InputNamespaces:
    """Namespace labels from the input's Namespace documents (`NamespaceLabels`). A namespace it has none
    for is unknown: the first time a rule needs its labels, one line says so on stderr, and `review` then
    exits 2 (the decision could not be made offline)."""

    labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    def add(self, doc: dict[str, Any]) -> None:
        meta = section(doc, "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return  # passed through; the API server would refuse it, no pod can be in it
        raw = meta.get("labels")
        labels = {k: v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, dict) else {}
        self.labels[name] = {**labels, NAME_LABEL: name}

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        if namespace in self.labels:
            return self.labels[namespace]
        if namespace not in self.unknown:
            self.unknown.append(namespace)
            print(
                f"review: namespace {namespace}: no Namespace document in the input, its labels are unknown "
                "and a PriorityClass's allowed-namespaces rule needs them",
                file=sys.stderr,
            )
        return None


@dataclass
class _Run:
    classes: ClassSet
    options: PodOptions
    stage: Stage
    namespace: str | None
    namespaces: InputNamespaces = field(default_factory=InputNamespaces)
    outputs: list[Any] = field(default_factory=list)
    denied: bool = False
    passed: list[str] = field(default_factory=list)  # kinds passed through, for the note
    class_results: dict[int, dict[str, Any] | None] = field(default_factory=dict)  # by input position
    defined_at: dict[str, tuple[int, str]] = field(default_factory=dict)  # class name -> (position, source)


def _input_classes(state: _Run, inputs: list[tuple[str, Any]]) -> None:
    """The input's PriorityClasses, admitted first and in input order (as `kubectl apply` of the classes
    would): each is a class for the whole input, and the API server's rules hold between them."""
    for i, (source, doc) in enumerate(inputs):
        if not isinstance(doc, dict) or doc.get("kind") != "PriorityClass":
            continue
        name = section(doc, "metadata").get("name")
        known = state.classes
        if isinstance(name, str) and name in state.classes:
            # Known already (a --classes file): this one replaces it, as `kubectl apply` would, so it is
            # not its own rival for the one default.
            state.classes = state.classes.without(name)
        stored = _object(source, doc, state)
        state.class_results[i] = stored
        if stored is None:
            state.classes = known  # refused: the class it would have replaced stays
        else:
            pc = PriorityClass.from_object(stored)
            state.classes = state.classes.with_class(pc)
            state.defined_at[pc.name] = (i, source)


def _warn_order(state: _Run, i: int, source: str, doc: Any) -> None:
    """A pod (or workload) that names a class the input defines only after it: `kubectl apply -f` creates
    in file order, so its pods would be refused until the class exists."""
    if not isinstance(doc, dict):
        return
    kind = doc.get("kind")
    spec: Any = doc.get("spec") if kind in ("Pod", "PodGroup") else None
    if isinstance(kind, str) and kind in WORKLOADS:
        template = pod_template(doc, kind)
        spec = template.get("spec") if template else None
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    if isinstance(name, str) and name in state.defined_at and state.defined_at[name][0] > i:
        print(
            f"Warning: {source}: PriorityClass {name} is defined after this {kind}, in "
            f"{state.defined_at[name][1]}; kubectl apply creates objects in file order: apply the "
            "PriorityClasses first",
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    state = _Run(
        classes=static_store(args.classes).snapshot(),
        options=PodOptions(legacy_critical_annotation=args.legacy_critical_annotation),
        stage=Stage(args.stage),
        namespace=args.namespace,
    )
    inputs: list[tuple[str, Any]] = []
    for path in args.files:
        docs = load_objects([path])
        if not docs:
            raise InputError(f"{'<stdin>' if path == '-' else path}: empty input: no objects to review")
        inputs.extend(docs)
    for _, doc in inputs:
        if isinstance(doc, dict) and doc.get("kind") == "Namespace":
            state.namespaces.add(doc)
    _input_classes(state, inputs)
    for i, (source, doc) in enumerate(inputs):
        if i in state.class_results:
            result = state.class_results[i]
            if result is None:
                state.denied = True
            else:
                state.outputs.append(result)
            continue
        _warn_order(state, i, source, doc)
        _document(state, source, doc)
    if state.passed:
        kinds = ", ".join(sorted(set(state.passed)))
        print(
            f"note: {len(state.passed)} object(s) passed through unchanged, priority admission does not "
            f"apply to their kind ({kinds})",
            file=sys.stderr,
        )
    if len(state.outputs) == 1:
        sys.stdout.write(dump(state.outputs[0], args.output))
    elif state.outputs:
        sys.stdout.write(dump({"apiVersion": "v1", "kind": "List", "items": state.outputs}, args.output))
    if state.namespaces.unknown:
        return 2  # a rule could not be decided: neither an admission nor a refusal can be promised
    return 1 if state.denied else 0


def _document(state: _Run, source: str, doc: Any) -> None:
    if not isinstance(doc, dict):
        raise InputError(f"{source}: expected a Kubernetes object, got {type(doc).__name__}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        shown = repr(kind)
        shown = shown if len(shown) <= SHORT_KIND else shown[:SHORT_KIND] + "..."  # one short line
        raise InputError(f"{source}: kind: must be a non-empty string, got {shown}")
    if kind == "AdmissionReview":
        state.outputs.append(_review(source, doc, state))  # a denial inside is an answer, not a failure
        return
    if kind in OBJECT_KINDS and _in_group(doc, OBJECT_KINDS[kind]):
        result = _object(source, doc, state)
    elif kind in WORKLOADS:
        result = _workload(source, doc, state)
    else:
        state.passed.append(kind if len(kind) <= SHORT_KIND else kind[:SHORT_KIND] + "...")
        result = doc
    if result is None:
        state.denied = True
    else:
        state.outputs.append(result)


def _review(source: str, doc: dict[str, Any], state: _Run) -> Any:
    try:
        response, _, _ = handle_review(
            doc, state.stage, state.classes, state.options, namespaces=state.namespaces
        )
    except MalformedReview as err:
        raise InputError(f"{source}: {err}") from None
    return response


def _namespace(source: str, obj: dict[str, Any], state: _Run) -> str:
    """The object's namespace, or -n, or default; a conflict is refused as kubectl refuses it."""
    meta = section(obj, "metadata")
    own = meta.get("namespace")
    if not isinstance(own, str):
        own = None  # reported by the object's schema as metadata.namespace
    if own and state.namespace and own != state.namespace:
        raise InputError(
            f'{source}: the namespace from the provided object "{own}" does not match '
            f'the namespace "{state.namespace}"'
        )
    return own or state.namespace or "default"


def _invalid(kind: str, obj: dict[str, Any], namespace: str | None) -> bool:
    """Name and namespace as the API server validates them; prints its error and says whether any."""
    meta = section(obj, "metadata")
    checked = {**obj, "metadata": {**meta, "namespace": namespace}} if namespace is not None else obj
    message = invalid_object(kind, checked, namespaced=namespace is not None)
    if message:
        print(kubectl_error("Invalid", message), file=sys.stderr)
    return message is not None


def _object(source: str, obj: dict[str, Any], state: _Run) -> dict[str, Any] | None:
    """A CREATE of `obj`, as `kubectl create` would send it; the stored object, or None if refused."""
    kind = obj["kind"]
    namespace = _namespace(source, obj, state) if OBJECT_KINDS[kind].namespaced else None
    if kind == "Pod" and _undecodable(obj, obj.get("spec")):
        return None
    default = DEFAULTS.get(kind)
    obj = default(obj) if default is not None else obj
    try:
        admitted = _admit(obj, namespace, state)
    except MalformedReview as err:
        raise InputError(f"{source}: {str(err).removeprefix('request.object.')}") from None
    if not isinstance(admitted, dict) or _invalid(kind, obj, namespace):
        return None
    return admitted


def _admit(obj: dict[str, Any], namespace: str | None, state: _Run, *, quiet: bool = False) -> Any:
    """The object after admission (mutated), or the denying Decision (printed unless quiet).

    Raises MalformedReview for an object the schemas refuse."""
    route = OBJECT_KINDS[obj["kind"]]
    group, resource = route.group, route.resource
    version = _version(obj, route)
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": CREATE,
        # A non-string name is left for the object's own schema to report as metadata.name.
        "name": meta.get("name") if isinstance(meta.get("name"), str) else "",
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }
    if namespace is not None:
        request["namespace"] = namespace
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    _, _, decision = handle_review(
        review, state.stage, state.classes, state.options, namespaces=state.namespaces
    )
    for warning in decision.warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    if not decision.allowed:
        if not quiet:
            print(kubectl_error(decision.reason, decision.message), file=sys.stderr)
        return decision
    return jsonpatch.apply_patch(obj, list(decision.patch)) if decision.patch else obj


def _in_group(obj: dict[str, Any], route: Route) -> bool:
    """The document is of the route's API group (a Volcano or scheduler-plugins PodGroup is not: it
    passes through); a document without apiVersion is taken as its kind's."""
    api_version = obj.get("apiVersion")
    return not isinstance(api_version, str) or api_version.rpartition("/")[0] == route.group


def _version(obj: dict[str, Any], route: Route) -> str:
    """The document's own API version when it is one the route knows (a PodGroup may be v1alpha2 or
    v1beta1), else the newest: the review names the version the client would send."""
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str):
        group, _, version = api_version.rpartition("/")
        if group == route.group and version in route.versions:
            return version
    return route.versions[-1]


def _undecodable(obj: dict[str, Any], spec: Any) -> bool:
    """A quantity the API server cannot decode: its 400 BadRequest, printed as kubectl prints it."""
    message = undecodable(obj, spec)
    if message:
        print(kubectl_error("BadRequest", message), file=sys.stderr)
    return message is not None


def _workload(source: str, obj: dict[str, Any], state: _Run) -> dict[str, Any] | None:
    """The workload with its pod template as its pods will be admitted, or None if they would be refused."""
    kind = obj["kind"]
    namespace = _namespace(source, obj, state)
    if _invalid(kind, obj, namespace):
        return None
    template = pod_template(obj, kind)
    if template is None:
        return obj  # nothing to admit; the API server's own validation speaks about the missing template
    if _undecodable(obj, template.get("spec")):
        return None
    try:
        admitted = _admit(template_pod(template, namespace), namespace, state, quiet=True)
    except MalformedReview as err:
        where = ".".join(template_path(kind))
        raise InputError(f"{source}: {where}.{str(err).removeprefix('request.object.')}") from None
    if not isinstance(admitted, dict):  # a Decision: the pods would be forbidden
        name = _name(obj)
        why = admitted.message.split(" is forbidden: ", 1)[-1]
        print(
            f"Error from server ({admitted.reason}): {workload_message(kind, namespace, name, why)}",
            file=sys.stderr,
        )
        return None
    if "spec" not in admitted:
        return obj
    return with_template(obj, kind, {**template, "spec": admitted["spec"]})


def _name(obj: dict[str, Any]) -> str:
    meta = section(obj, "metadata")
    for key in ("name", "generateName"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return "Unknown"
