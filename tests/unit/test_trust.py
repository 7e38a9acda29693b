"""The trust a run gives its clients (session/trust.py): the hashed directory verifies what the bundle does."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from semula.session import trust
from semula.session.ca import ensure_ca


def serve_once(context: ssl.SSLContext) -> tuple[int, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        with listener:
            connection, _ = listener.accept()
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass  # the client refused our certificate: its side says why

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def leaf_context(confdir: Path, host: str) -> ssl.SSLContext:
    """A server context with a certificate for host issued by confdir's CA, as mitmproxy makes them."""
    from mitmproxy.certs import CertStore

    store = CertStore.from_store(confdir, "mitmproxy", 2048)
    entry = store.get_cert(host, [])
    (confdir / "leaf.pem").write_bytes(entry.cert.to_pem())
    (confdir / "leaf.key").write_bytes(entry.privatekey.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(confdir / "leaf.pem", confdir / "leaf.key")
    return context


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, host: str) -> None:
    port, thread = serve_once(server)
    with socket.create_connection(("127.0.0.1", port)) as raw, client.wrap_socket(raw, server_hostname=host):
        pass
    thread.join(5)


def test_a_client_trusting_the_directory_verifies_semulas_certificates_and_no_others(tmp_path: Path) -> None:
    ca = ensure_ca(tmp_path)
    directory = trust.hashed_directory(tmp_path, trust.bundle_file(tmp_path, ca))
    handshake(ssl.create_default_context(capath=directory), leaf_context(tmp_path, "api.openai.com"), "api.openai.com")

    other = tmp_path / "other"  # a CA the directory does not hold
    ensure_ca(other)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(ssl.create_default_context(capath=directory), leaf_context(other, "api.openai.com"), "api.openai.com")


def test_the_directory_holds_every_certificate_of_the_bundle_under_openssls_names(tmp_path: Path) -> None:
    bundle = trust.bundle_file(tmp_path, ensure_ca(tmp_path))
    directory = trust.hashed_directory(tmp_path, bundle)
    names = sorted(p.name for p in directory.iterdir())
    assert len(names) == bundle.read_text().count("BEGIN CERTIFICATE")
    assert trust.hashed_directory(tmp_path, bundle) == directory  # made once per content
    if shutil.which("openssl"):  # what `openssl rehash` names the same files
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        for i, path in enumerate(sorted(directory.iterdir())):
            shutil.copy(path, theirs / f"c{i}.pem")
        subprocess.run(["openssl", "rehash", str(theirs)], check=True, capture_output=True)
        assert sorted(p.name for p in theirs.iterdir() if not p.name.endswith(".pem")) == names


def test_a_shared_subject_hash_gets_the_next_suffix_and_an_unreadable_block_is_left_out(tmp_path: Path) -> None:
    pem = ensure_ca(tmp_path).read_text().strip()
    broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"
    names = [name for name, _ in trust.hashed_names([pem, broken, pem])]
    assert [n.split(".")[1] for n in names] == ["0", "1"] and len({n.split(".")[0] for n in names}) == 1


def test_two_runs_making_the_directory_at_once_both_get_a_whole_one(tmp_path: Path) -> None:
    bundle = trust.bundle_file(tmp_path, ensure_ca(tmp_path))
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(trust.hashed_directory(tmp_path, bundle)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert len(list(results[0].iterdir())) == bundle.read_text().count("BEGIN CERTIFICATE")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".{trust.DIRECTORY_PREFIX}")]
