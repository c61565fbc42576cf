"""`priority-webhook certs`: a CA and a serving certificate for the webhook's Service."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.commands import dispatch
from webhook.files import tls
from webhook.files.documents import InputError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = dispatch.add_command(
        sub,
        "certs",
        description="Write ca.crt, ca.key (new CA only), tls.crt and tls.key (mode 0600 for keys) into "
        "--out, for the Service NAME in NS; print the base64 caBundle for the webhook configurations. "
        "With --ca-dir, sign the new serving certificate with the CA there (rotation: the caBundle stays).",
    )
    parser.add_argument("--service", required=True, metavar="NAME", help="the webhook's Service name")
    parser.add_argument("--namespace", required=True, metavar="NS", help="the Service's namespace")
    parser.add_argument("--out", default="certs", type=Path, metavar="DIR", help="default: %(default)s")
    parser.add_argument(
        "--days", default=365, type=int, metavar="N", help="serving certificate validity (default: 365)"
    )
    parser.add_argument(
        "--ca-dir",
        type=Path,
        metavar="DIR",
        help="reuse the CA in DIR (ca.crt + ca.key) instead of creating one",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.days < 1:
        raise InputError(f"--days: must be at least 1, got {args.days}")
    for flag, value in (("--service", args.service), ("--namespace", args.namespace)):
        if not tls.is_dns_label(value):
            raise InputError(f"{flag}: {value!r} is not a DNS label (lowercase letters, digits and '-')")
    if args.ca_dir is not None:
        for name in (tls.CA_CERT, tls.CA_KEY):
            if not (args.ca_dir / name).is_file():
                raise InputError(f"--ca-dir: {args.ca_dir / name} does not exist")
    try:
        ca = tls.write_certificates(args.out, args.service, args.namespace, args.days, args.ca_dir)
    except OSError as err:
        raise InputError(f"--out: {err}") from None
    except ValueError as err:
        raise InputError(f"--ca-dir: {err}") from None
    sys.stdout.write(tls.ca_bundle(ca.cert_pem()) + "\n")
    return 0
