"""Apply the rotation plan to the cluster: Secret and the webhook configuration's caBundle."""

from __future__ import annotations

import base64
import datetime as dt
import logging

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.pki import service_names
from certs.rotation import CA_BUNDLE, next_secret

log = logging.getLogger(__name__)


def reconcile(
    api_client: client.ApiClient,
    namespace: str,
    service: str,
    secret: str,
    webhook_config: str,
    renew_before: dt.timedelta,
) -> bool:
    core = client.CoreV1Api(api_client)
    adm = client.AdmissionregistrationV1Api(api_client)
    try:
        existing = core.read_namespaced_secret(secret, namespace)
        current = {k: base64.b64decode(v) for k, v in (existing.data or {}).items()}
    except ApiException as err:
        if err.status != 404:
            raise
        existing, current = None, None
    now = dt.datetime.now(dt.UTC)
    data, changed = next_secret(current, service_names(service, namespace), now, renew_before)
    # caBundle first (old and new CA both trusted), then the Secret the webhook reloads from.
    config = adm.read_mutating_webhook_configuration(webhook_config)
    ca_bundle = base64.b64encode(data[CA_BUNDLE]).decode()
    if any((w.client_config.ca_bundle or "") != ca_bundle for w in config.webhooks or []):
        patch = {
            "webhooks": [
                {"name": w.name, "clientConfig": {"caBundle": ca_bundle}}
                for w in config.webhooks or []
            ]
        }
        adm.patch_mutating_webhook_configuration(webhook_config, patch)
        log.info("caBundle updated", extra={"config": webhook_config})
    if changed:
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=secret, namespace=namespace),
            type="kubernetes.io/tls",
            data={k: base64.b64encode(v).decode() for k, v in data.items()},
        )
        if existing is None:
            core.create_namespaced_secret(namespace, body)
        else:
            core.replace_namespaced_secret(secret, namespace, body)
        log.info("webhook certificate written", extra={"secret": f"{namespace}/{secret}"})
    return changed
