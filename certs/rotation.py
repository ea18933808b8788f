"""What the Secret should hold next, from what it holds now. Pure (the clock is an argument).

Order that keeps the webhook reachable: the caller first writes the returned caBundle into the
MutatingWebhookConfiguration, then the Secret; since the bundle holds the old and the new CA until
the old one expires, whichever certificate the webhook serves at any moment is trusted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from cryptography import x509

from certs.pki import Pair, bundle, due, make_ca, make_serving

TLS_CRT, TLS_KEY, CA_CRT, CA_KEY, CA_BUNDLE = (
    "tls.crt",
    "tls.key",
    "ca.crt",
    "ca.key",
    "ca-bundle.crt",
)


def _names(cert_pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return list(san.value.get_values_for_type(x509.DNSName))


CERT_DAYS = 365  # the serving certificate's lifetime


def next_secret(
    current: Mapping[str, bytes] | None,
    dns_names: list[str],
    now: dt.datetime,
    renew_before: dt.timedelta = dt.timedelta(days=30),
    ca_days: int = 3650,
    cert_days: int = CERT_DAYS,
) -> tuple[dict[str, bytes], bool]:
    """(new Secret data, changed?)."""
    data = dict(current or {})
    changed = False
    if not all(k in data for k in (CA_CRT, CA_KEY)) or due(data[CA_CRT], now, renew_before):
        old_ca = data.get(CA_CRT, b"")
        ca = make_ca("gpufabric-webhook-ca", now, ca_days)
        data[CA_CRT], data[CA_KEY] = ca.cert_pem, ca.key_pem
        data[CA_BUNDLE] = bundle(old_ca, ca.cert_pem, now=now) if old_ca else ca.cert_pem
        data.pop(TLS_CRT, None)  # re-issue from the new CA
        changed = True
    ca = Pair(data[CA_CRT], data[CA_KEY])
    pruned = bundle(data.get(CA_BUNDLE, b""), ca.cert_pem, now=now)
    if pruned != data.get(CA_BUNDLE):
        data[CA_BUNDLE] = pruned
        changed = True
    serving_ok = (
        TLS_CRT in data
        and TLS_KEY in data
        and not due(data[TLS_CRT], now, renew_before)
        and sorted(_names(data[TLS_CRT])) == sorted(dns_names)
    )
    if not serving_ok:
        serving = make_serving(ca, dns_names, now, cert_days)
        data[TLS_CRT], data[TLS_KEY] = serving.cert_pem, serving.key_pem
        changed = True
    return data, changed
