from __future__ import annotations

import datetime as dt
import ipaddress

from cryptography import x509

from certs.pki import expires, make_ca, make_serving, service_names
from certs.rotation import CA_BUNDLE, CA_CRT, TLS_CRT, next_secret

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAMES = service_names("gpufabric-webhook", "gpufabric-system")


def test_first_run_creates_ca_and_serving_cert_for_the_service_names() -> None:
    data, changed = next_secret(None, NAMES, NOW)
    assert changed
    cert = x509.load_pem_x509_certificate(data[TLS_CRT])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gpufabric-webhook.gpufabric-system.svc" in san.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(data[CA_CRT])
    cert.verify_directly_issued_by(ca)
    assert data[CA_BUNDLE] == data[CA_CRT]


def test_nothing_changes_while_valid() -> None:
    data, _ = next_secret(None, NAMES, NOW)
    again, changed = next_secret(data, NAMES, NOW + dt.timedelta(days=100))
    assert not changed and again == data


def test_serving_cert_is_renewed_before_expiry_from_the_same_ca() -> None:
    data, _ = next_secret(None, NAMES, NOW, cert_days=60)
    later = NOW + dt.timedelta(days=40)
    renewed, changed = next_secret(data, NAMES, later)
    assert changed and renewed[TLS_CRT] != data[TLS_CRT] and renewed[CA_CRT] == data[CA_CRT]
    assert expires(renewed[TLS_CRT]) > later + dt.timedelta(days=300)


def test_ca_rotation_bundles_old_and_new_until_the_old_expires() -> None:
    data, _ = next_secret(None, NAMES, NOW, ca_days=60)
    old_ca = data[CA_CRT]
    rotated, changed = next_secret(data, NAMES, NOW + dt.timedelta(days=40))
    assert changed and rotated[CA_CRT] != old_ca
    bundle = x509.load_pem_x509_certificates(rotated[CA_BUNDLE])
    assert len(bundle) == 2  # the API server trusts both while the webhook switches over
    new_serving = x509.load_pem_x509_certificate(rotated[TLS_CRT])
    new_serving.verify_directly_issued_by(x509.load_pem_x509_certificate(rotated[CA_CRT]))
    after, _ = next_secret(rotated, NAMES, NOW + dt.timedelta(days=61))
    assert len(x509.load_pem_x509_certificates(after[CA_BUNDLE])) == 1


def test_serving_cert_names_an_ip_address_as_an_ip_san() -> None:
    # The API server (Go) verifies a webhook URL on 127.0.0.1 against IP SANs only.
    cert = make_serving(make_ca("t", NOW), ["localhost", "127.0.0.1"], NOW).cert
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
