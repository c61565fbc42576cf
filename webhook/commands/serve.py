"""`priority-webhook serve`: the admission webhook over HTTPS, until SIGTERM (in-flight reviews finish)."""

from __future__ import annotations

import argparse
import datetime
import logging
import re
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.commands import dispatch
from webhook.commands.options import (
    add_classes,
    add_cluster,
    add_legacy_annotation,
    add_log_level,
    parse_bind,
    positive_float,
    positive_int,
    seconds,
)
from webhook.files import InputError, tls
from webhook.kube import ConfigError
from webhook.policy.class_model import ClassStore
from webhook.policy.pod_rules import DEFAULT_POD_OPTIONS, PodOptions

# None of these import prometheus_client: `serve` must choose the metrics directory first (the app and
# its metrics are imported after that, by the master just before it forks the workers).
from webhook.server.gunicorn import ServeSettings, WebhookApplication, cert_files, metrics_dir
from webhook.server.limits import KEEPALIVE, MAX_CONNECTIONS, REQUEST_TIMEOUT, SHUTDOWN_DELAY
from webhook.server.store import StoreSpec, open_store
from webhook.server.tlscontext import ReloadingContext

if TYPE_CHECKING:
    from webhook.kube.rotator import Rotator

log = logging.getLogger("webhook.serve")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "serve",
        description="Serve the admission webhook over HTTPS (TLS 1.2+). Without --kubeconfig or "
        "--in-cluster, the classes are the built-in system classes plus --classes files. A certificate "
        "rewritten in --cert-dir is picked up without a restart.",
    )
    parser.add_argument("--bind", default="0.0.0.0:8443", metavar="HOST:PORT", help="default: %(default)s")
    parser.add_argument(
        "--cert-dir",
        default="certs",
        type=Path,
        metavar="DIR",
        help="holds tls.crt and tls.key; a development certificate is generated there if it has none "
        "(default: %(default)s)",
    )
    add_classes(parser)
    add_cluster(parser)
    add_legacy_annotation(parser)
    parser.add_argument(
        "--deny-unadmittable-workloads",
        action="store_true",
        help="deny a Deployment, Job, ... whose pods would be forbidden (default: admit it with a warning)",
    )
    parser.add_argument(
        "--system-namespace",
        action="append",
        dest="system_namespaces",
        metavar="NAMESPACE",
        help="a namespace served by fail-open webhook entries (repeat for several; the chart passes "
        "admission.systemNamespaces): a pod there that reaches /validate without spec.priority, its "
        "mutation skipped by a timeout or an outage, is admitted with a warning and counted in "
        "priority_webhook_unresolved_pods_total (default: kube-system)",
    )
    parser.add_argument("--workers", type=positive_int, default=2, help="processes (default: %(default)s)")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=8,
        help="threads per process that run complete requests (default: %(default)s)",
    )
    parser.add_argument(
        "--graceful-timeout",
        type=positive_int,
        default=25,
        metavar="SECONDS",
        help="how long in-flight reviews may take to finish after SIGTERM (default: %(default)s)",
    )
    parser.add_argument(
        "--shutdown-delay",
        type=seconds,
        default=SHUTDOWN_DELAY,
        metavar="SECONDS",
        help="after SIGTERM, go on accepting and answering for this long, each answer closing its "
        "connection, before closing the connections left idle: a client that reuses kept-alive "
        "connections (the API server) never writes to one being closed (default: %(default)g; counted "
        "within --graceful-timeout)",
    )
    parser.add_argument(
        "--read-timeout",
        type=positive_float,
        default=REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="longest a client may take for the TLS handshake, and for a whole request (line, headers and "
        "body) from its first byte; slower requests are answered 408 and their connection closed "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--keepalive",
        type=positive_float,
        default=KEEPALIVE,
        metavar="SECONDS",
        help="how long an idle kept-alive connection stays open (default: %(default)s; the API server "
        "keeps its idle connections for 90 s)",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help="connections each worker process holds at most; at the limit, the one that has waited longest "
        "for its client is closed to make room (default: %(default)s)",
    )
    rotation = parser.add_argument_group(
        "certificates issued by the webhook itself (needs --kubeconfig or --in-cluster)",
        "With --ca-secret, the webhook keeps a CA in that Secret (made if absent), issues its serving "
        "certificate from it into --cert-dir before it starts serving, renews both at run time with an "
        "overlap, and keeps the caBundle of --webhook-configuration current.",
    )
    rotation.add_argument(
        "--ca-secret",
        metavar="NS/NAME",
        type=_secret_ref,
        help="the Secret that holds the CA (namespace/name)",
    )
    rotation.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        help="the MutatingWebhookConfiguration and ValidatingWebhookConfiguration whose caBundle to keep",
    )
    rotation.add_argument(
        "--service",
        default=tls.DEFAULT_SERVICE,
        metavar="NAME",
        help="the webhook's Service, in the Secret's namespace: the serving certificate's names "
        "(default: %(default)s)",
    )
    rotation.add_argument(
        "--ca-validity", type=_duration, default="17520h", metavar="DURATION", help="default: %(default)s"
    )
    rotation.add_argument(
        "--cert-validity",
        type=_duration,
        default="2160h",
        metavar="DURATION",
        help="serving certificate (default: %(default)s); both renew two thirds through their life",
    )
    rotation.add_argument(
        "--rotation-interval",
        type=_duration,
        default="60s",
        metavar="DURATION",
        help="how often the certificates and caBundle are checked (default: %(default)s)",
    )
    parser.add_argument("--access-log", action="store_true", help="log one line per request to stderr")
    add_log_level(parser)
    parser.set_defaults(run=run)


_DURATION = re.compile(r"([0-9]+)(s|m|h|d)")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _duration(text: str) -> datetime.timedelta:
    """`90s`, `15m`, `2160h`, `730d`: one number and one unit, more than zero."""
    found = _DURATION.fullmatch(text)
    if not found or int(found.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 90s, 15m, 2160h or 730d, got {text!r}"
        )
    return datetime.timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def _secret_ref(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if (
        not sep
        or not tls.is_dns_label(namespace)
        or not re.fullmatch(r"[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?", name)
    ):
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME of a Secret, got {text!r}")
    return namespace, name


def check_bind(bind: str) -> str:
    """gunicorn takes the flag as it is (`[::1]:8443` too), once it passed the shared rules."""
    try:
        parse_bind(bind, min_port=1)
    except ValueError:
        raise InputError(f"--bind: expected HOST:PORT with a port from 1 to 65535, got {bind!r}") from None
    return bind


def run(args: argparse.Namespace) -> int:
    spec = StoreSpec(tuple(args.classes), args.kubeconfig, args.in_cluster)
    if spec.cluster and spec.classes:
        raise InputError(
            "--classes: cannot be combined with --kubeconfig/--in-cluster (the cluster's "
            "PriorityClasses are served)"
        )
    if args.shutdown_delay >= args.graceful_timeout:
        raise InputError(
            f"--shutdown-delay {args.shutdown_delay:g}: must be less than --graceful-timeout "
            f"({args.graceful_timeout}), which counts from SIGTERM and also bounds the requests in progress"
        )
    settings = ServeSettings(
        bind=check_bind(args.bind),
        cert_dir=args.cert_dir,
        store=spec,
        options=PodOptions(
            legacy_critical_annotation=args.legacy_critical_annotation,
            deny_unadmittable_workloads=args.deny_unadmittable_workloads,
            system_namespaces=frozenset(args.system_namespaces or DEFAULT_POD_OPTIONS.system_namespaces),
        ),
        workers=args.workers,
        threads=args.threads,
        graceful_timeout=args.graceful_timeout,
        shutdown_delay=args.shutdown_delay,
        read_timeout=args.read_timeout,
        keepalive=args.keepalive,
        max_connections=args.max_connections,
        access_log=args.access_log,
        log_level=args.log_level,
    )
    master_store = _check_store(spec)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )
    rotator = _issue_own_certificates(args, spec) if args.ca_secret is not None else None
    if rotator is None and args.webhook_configuration is not None:
        raise InputError("--webhook-configuration: needs --ca-secret (the CA whose bundle it keeps)")
    certificate = _tls(args.cert_dir, args.read_timeout)
    with metrics_dir() as path:
        log.info("metrics directory %s", path)
        if rotator is not None:
            rotator.start(args.rotation_interval.total_seconds())
        WebhookApplication(settings, certificate, master_store).run()
    return 0


def _issue_own_certificates(args: argparse.Namespace, spec: StoreSpec) -> Rotator:
    """Before serving: a serving certificate that every webhook configuration trusts. The server does not
    listen before that, so a replica is never ready with a certificate the API server would refuse. The
    rotator's thread (in this master process) then renews it, the CA and the caBundle at run time."""
    if not spec.cluster:
        raise InputError("--ca-secret: needs --kubeconfig or --in-cluster (the CA is kept in the cluster)")
    if not tls.is_dns_label(args.service):
        raise InputError(
            f"--service: {args.service!r} is not a DNS label (lowercase letters, digits and '-')"
        )
    if args.cert_validity * 3 > args.ca_validity:
        raise InputError(
            "--cert-validity: must be at most a third of --ca-validity (the CA's renewal margin)"
        )
    from webhook.kube.ca_secret import RotationSettings
    from webhook.kube.config import api_client
    from webhook.kube.rotator import Rotator

    namespace, secret = args.ca_secret
    rotator = Rotator(
        api_client(spec.kubeconfig, spec.in_cluster),
        RotationSettings(
            namespace=namespace,
            secret=secret,
            configuration=args.webhook_configuration,
            service=args.service,
            cert_dir=args.cert_dir,
            ca_lifetime=args.ca_validity,
            cert_lifetime=args.cert_validity,
        ),
    )
    interval = args.rotation_interval.total_seconds()
    log.info("issuing the serving certificate from the CA in Secret %s/%s", namespace, secret)
    rotator.wait_ready(interval, threading.Event())
    return rotator


def _check_store(spec: StoreSpec) -> ClassStore | None:
    """Fail fast, in the master: the static store is built (and shared by the workers); for a cluster,
    the client configuration is read once (each worker then opens its own connection)."""
    if not spec.cluster:
        return open_store(spec)  # raises InputError for a bad classes file
    from webhook.kube.config import api_client  # the cluster modules load only when a cluster is used

    try:
        api_client(spec.kubeconfig, spec.in_cluster).close()
    except ConfigError:
        raise
    except Exception as err:  # the kubernetes client raises several unrelated types for a bad config
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{spec.kubeconfig or 'in-cluster config'}: {detail}") from None
    return None


def _tls(cert_dir: Path, read_timeout: float) -> ReloadingContext:
    cert, key = cert_files(cert_dir)
    if not cert.exists() and not key.exists():
        try:
            tls.write_certificates(cert_dir)
        except OSError as err:
            raise InputError(f"--cert-dir: cannot write a development certificate: {err}") from None
        log.warning(
            "no certificate in %s: generated a development certificate for %s.%s.svc and localhost (CA: %s)",
            cert_dir,
            tls.DEFAULT_SERVICE,
            tls.DEFAULT_NAMESPACE,
            cert_dir / tls.CA_CERT,
        )
    try:
        return ReloadingContext(cert, key, handshake_timeout=read_timeout)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise InputError(f"--cert-dir: cannot load {cert} and {key}: {err}") from None
