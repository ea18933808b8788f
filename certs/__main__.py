"""python -m certs: create or renew the webhook's CA and serving certificate in a Secret and keep
the MutatingWebhookConfiguration's caBundle in step. Run as a Job or CronJob (daemonset/)."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import time

from common import cli, logs
from common.logs import configure

PROG = "python -m certs"
log = logging.getLogger("certs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    parser.add_argument("-V", "--version", action="version", version=f"gpufabric {cli.version()}")
    parser.add_argument(
        "command",
        choices=["bootstrap"],
        help="bootstrap: create the CA and serving certificate, or renew them when due",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", "gpufabric-system"),
        help="namespace of the Secret and the Service (default: $POD_NAMESPACE, else "
        "gpufabric-system)",
    )
    parser.add_argument(
        "--service",
        default="gpufabric-webhook",
        help="the webhook's Service, named in the certificate (default: gpufabric-webhook)",
    )
    parser.add_argument(
        "--secret",
        default="gpufabric-webhook-tls",
        help="Secret holding the CA and the serving pair (default: gpufabric-webhook-tls)",
    )
    parser.add_argument(
        "--webhook-config",
        default="gpufabric-webhook",
        help="MutatingWebhookConfiguration whose caBundle is kept in step "
        "(default: gpufabric-webhook)",
    )
    parser.add_argument(
        "--renew-before-days",
        type=int,
        default=30,
        help="renew a certificate this many days before it expires (default: 30)",
    )
    parser.add_argument(
        "--loop",
        type=float,
        default=0,
        metavar="SECONDS",
        help="keep reconciling every SECONDS (default: 0, once)",
    )
    cli.add_kubeconfig(parser)
    logs.add_arguments(parser)
    return parser


# A loop longer than a day could miss a short renewal window.
MAX_LOOP_SECONDS = 86400


def check(args: argparse.Namespace) -> None:
    """UsageError (one line) for a value that cannot work."""
    from certs.rotation import CERT_DAYS  # renewing that many days early: on every run

    if not 0 <= args.renew_before_days < CERT_DAYS:
        raise cli.UsageError(
            f"--renew-before-days {args.renew_before_days}: accepted values: 0 to "
            f"{CERT_DAYS - 1} (the serving certificate lasts {CERT_DAYS} days)"
        )
    if not (args.loop == 0 or 1 <= args.loop <= MAX_LOOP_SECONDS):  # also refuses nan
        raise cli.UsageError(
            f"--loop {args.loop:g}: accepted values: 0 (once) or 1 to {MAX_LOOP_SECONDS} seconds"
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_level, args.log_json)
    try:
        check(args)
        from certs.bootstrap import reconcile
        from common.kube import load_api_client

        api_client = load_api_client(args.kubeconfig)
        while True:
            reconcile(
                api_client,
                args.namespace,
                args.service,
                args.secret,
                args.webhook_config,
                dt.timedelta(days=args.renew_before_days),
            )
            if not args.loop:
                return 0
            time.sleep(args.loop)
    except cli.UsageError as err:
        return cli.fail(PROG, str(err))
    except ModuleNotFoundError as err:
        return cli.fail(PROG, cli.missing_module(err))
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # an API failure: one line, not a traceback
        log.debug("reconcile failed", exc_info=True)
        print(f"{PROG}: {logs.safe(err, 300)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
