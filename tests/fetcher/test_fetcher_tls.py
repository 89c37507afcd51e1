"""https through the pinned connection: SNI and certificate checked against the host name.

A private CA is made for the test (``cryptography``); the server presents a certificate for
``pinned.example`` only, and that name exists only in the test resolver's table.
"""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest

from xyro.records import ErrorKind

x509 = pytest.importorskip("cryptography.x509", reason="needs cryptography to make a test CA")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

HOST = "pinned.example"


def _cert(subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool) -> Any:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    folder = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("Xyro Test CA", ca_key, "Xyro Test CA", ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert(HOST, leaf_key, "Xyro Test CA", ca_key, ca=False)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "leaf.key").write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")
    return folder / "ca.pem", context


def test_https_connects_to_the_pinned_address_and_verifies_the_name(
        pki: tuple[Path, ssl.SSLContext], serve: Any, make_fetcher: Any) -> None:
    ca, context = pki
    server = serve({"/": lambda h: serve.send(h, 200, b"<html>tls</html>")}, tls=context)
    fetcher = make_fetcher(hosts={HOST: ["127.0.0.1"]}, ca_bundle=str(ca))
    url = f"https://{HOST}:{server.port}/"
    results = [fetcher.fetch(url) for _ in range(3)]
    assert [r.error_kind for r in results] == [None] * 3, results[0].error_detail
    assert results[0].body == b"<html>tls</html>"
    assert server.log[0].headers["host"] == f"{HOST}:{server.port}"
    assert len(server.connections()) == 1   # kept alive through TLS too


def test_https_refuses_a_certificate_for_another_name(
        pki: tuple[Path, ssl.SSLContext], serve: Any, make_fetcher: Any) -> None:
    ca, context = pki
    server = serve({"/": lambda h: serve.send(h, 200, b"x")}, tls=context)
    fetcher = make_fetcher(hosts={"other.example": ["127.0.0.1"]}, ca_bundle=str(ca))
    result = fetcher.fetch(f"https://other.example:{server.port}/")
    assert result.error_kind == ErrorKind.CONNECT
    assert "other.example" in (result.error_detail or "")
    untrusted = make_fetcher(hosts={HOST: ["127.0.0.1"]}).fetch(f"https://{HOST}:{server.port}/")
    assert untrusted.error_kind == ErrorKind.CONNECT
    assert server.log == []
