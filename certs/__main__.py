"""python -m certs: create or renew the webhook's CA and serving certificate in a Secret and keep
the MutatingWebhookConfiguration's caBundle in step. Run as a Job or CronJob (daemonset/)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

from common.logs import configure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m certs", description=__doc__)
    parser.add_argument("command", choices=["bootstrap"])
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "gpufabric-system"))
    parser.add_argument("--service", default="gpufabric-webhook")
    parser.add_argument("--secret", default="gpufabric-webhook-tls")
    parser.add_argument("--webhook-config", default="gpufabric-webhook")
    parser.add_argument("--renew-before-days", type=int, default=30)
    parser.add_argument(
        "--loop",
        type=float,
        default=0,
        metavar="SECONDS",
        help="keep reconciling every SECONDS (0: once)",
    )
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    args = parser.parse_args(argv)
    configure()
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


if __name__ == "__main__":
    sys.exit(main())
