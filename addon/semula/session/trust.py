"""What a run's clients trust: the public roots plus semula's CA, as a bundle file and as a hashed directory.

A bundle file is read whole each time a client builds a TLS context: certifi's ~140 roots cost an SDK client
made per test tens of milliseconds (httpx loads `SSL_CERT_FILE` eagerly). A directory in OpenSSL's hashed
layout (`<subject hash>.<n>`, what `openssl rehash` makes) is read lazily: a context costs what a bare one
does, and a handshake opens only the file of the issuer it needs. Clients that read a directory get it
(`SSL_CERT_DIR`, `REQUESTS_CA_BUNDLE`); those that take only a file (curl, Node's extra CAs, git, boto3,
gRPC) get the bundle. Both hold the same certificates.

Every file here is written aside and renamed, and the directory is named by its content, so a client of
another run (an xdist worker) never reads half of one and two runs never write the same one in place.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

BUNDLE = "semula-ca-bundle.pem"
CA_ONLY = "semula-ca-only.pem"
DIRECTORY_PREFIX = "semula-ca-dir-"
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s.*?-----END CERTIFICATE-----", re.S)


def public_roots() -> str:
    import certifi

    return Path(certifi.where()).read_text()


def write_file(confdir: Path, name: str, text: str) -> Path:
    """confdir/name holding text, replaced whole (written aside, then renamed)."""
    path = confdir / name
    partial = path.with_name(f"{name}.{os.getpid()}.tmp")
    partial.write_text(text)
    os.replace(partial, path)
    return path


def bundle_file(confdir: Path, ca: Path) -> Path:
    """The public roots and semula's CA in one PEM file."""
    return write_file(confdir, BUNDLE, public_roots() + "\n" + ca.read_text())


def ca_only_file(confdir: Path, ca: Path) -> Path:
    """semula's CA alone: for a run whose proxy decrypts every HTTPS host (`--intercept-all`)."""
    return write_file(confdir, CA_ONLY, ca.read_text())


def hashed_directory(confdir: Path, bundle: Path) -> Path:
    """The bundle's certificates as a directory in OpenSSL's hashed layout, made once per content."""
    text = bundle.read_text()
    target = confdir / f"{DIRECTORY_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if target.is_dir():
        return target
    partial = Path(tempfile.mkdtemp(prefix=f".{DIRECTORY_PREFIX}", dir=confdir))
    try:
        for name, pem in hashed_names(_PEM.findall(text)):
            (partial / name).write_text(pem + "\n")
        partial.chmod(0o755)
        try:
            partial.rename(target)
        except OSError:  # another run made it first (the same content): use theirs
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def hashed_names(pems: list[str]) -> list[tuple[str, str]]:
    """Each certificate's file name in a hashed directory: its subject hash, then .0, .1… for a shared hash."""
    from OpenSSL import crypto

    taken: dict[str, int] = {}
    named = []
    for pem in pems:
        try:
            subject = f"{crypto.load_certificate(crypto.FILETYPE_PEM, pem.encode()).subject_name_hash():08x}"
        except crypto.Error:
            continue  # a block OpenSSL cannot read would not be trusted from the file either
        index = taken[subject] = taken.get(subject, -1) + 1
        named.append((f"{subject}.{index}", pem))
    return named
