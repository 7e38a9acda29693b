"""mitmproxy's CA in a confdir, made once and whole before any proxy or client uses it.

The files mitmproxy writes, the confdir and key size a run's `--set` options pick, and `ensure_ca`,
which makes the CA under a lock (threads and processes alike) so every client trusts the one the
proxy serves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click

DEFAULT_CONFDIR = "~/.mitmproxy"

# The files mitmproxy's CertStore.create_store writes; mitmproxy loads CA_KEY on start (and makes a
# new CA when it is missing), clients trust CA_CERT.
CA_BASENAME = "mitmproxy"
CA_KEY = f"{CA_BASENAME}-ca.pem"
CA_CERT = f"{CA_BASENAME}-ca-cert.pem"
CA_FILES = (CA_KEY, f"{CA_BASENAME}-ca.p12", CA_CERT, f"{CA_BASENAME}-ca-cert.cer",
            f"{CA_BASENAME}-ca-cert.p12", f"{CA_BASENAME}-dhparam.pem")
CA_LOCK = ".semula-ca.lock"
CA_PARTIAL_PREFIX = ".semula-ca-"
DEFAULT_KEY_SIZE = 2048  # mitmproxy's key_size default
# A CA key another program (a plain mitmdump) is still writing: how long to wait for it to parse.
CA_WRITE_WAIT_S = 10.0


def ensure_ca(confdir: Path, key_size: int = DEFAULT_KEY_SIZE) -> Path:
    """mitmproxy's CA certificate in confdir, made once, before any proxy starts: the one it serves.

    mitmproxy makes its CA only once it listens — after `semula ready` — and file by file: a client
    set up meanwhile made a second one and trusted that. Here one caller at a time (a lock on
    confdir/.semula-ca.lock) makes the CA in a temporary dir inside confdir and moves its files in,
    mitmproxy-ca.pem (the one mitmproxy looks for) last, so a reader sees no CA or a whole one; the
    callers that waited read the CA the first one made. The proxy commands call this before
    mitmproxy starts; mitmproxy then loads this CA and makes none of its own.
    """
    confdir = confdir.expanduser()
    cert = confdir / CA_CERT
    if _ca_in_place(confdir):
        return cert
    confdir.mkdir(parents=True, exist_ok=True)
    with _ca_lock(confdir) as locked:
        if locked:
            _remove_partials(confdir)  # left by a caller that died while making one
        if not _ca_in_place(confdir):
            if (confdir / CA_KEY).exists():  # a CA mitmproxy made or is writing, or one of the user's
                _complete_ca(confdir)
            else:
                _create_ca(confdir, key_size)
    return cert


def _ca_in_place(confdir: Path) -> bool:
    return (confdir / CA_KEY).is_file() and (confdir / CA_CERT).is_file()


@contextlib.contextmanager
def _ca_lock(confdir: Path) -> Iterator[bool]:
    """An exclusive lock on confdir's CA (threads and processes alike); False where none can be had."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic moves alone
        yield False
        return
    fd = os.open(confdir / CA_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _remove_partials(confdir: Path) -> None:
    for leftover in confdir.glob(f"{CA_PARTIAL_PREFIX}*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        elif leftover.name.endswith(".tmp"):
            leftover.unlink(missing_ok=True)


def _create_ca(confdir: Path, key_size: int) -> None:
    """A new CA, written aside and moved in whole; mitmproxy-ca.pem last, and only if still absent."""
    from mitmproxy.certs import CertStore

    partial = Path(tempfile.mkdtemp(prefix=CA_PARTIAL_PREFIX, dir=confdir))
    try:
        CertStore.create_store(partial, CA_BASENAME, key_size)
        for name in CA_FILES:
            if name != CA_KEY:
                os.replace(partial / name, confdir / name)
        try:
            os.link(partial / CA_KEY, confdir / CA_KEY)  # fails if one appeared: the first CA wins
        except FileExistsError:
            _complete_ca(confdir, rewrite=True)  # an unlocked writer (a plain mitmdump) won: use its CA
        except OSError:  # no hard links here: the lock alone keeps it one CA
            os.replace(partial / CA_KEY, confdir / CA_KEY)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _complete_ca(confdir: Path, rewrite: bool = False) -> None:
    """Write the certificate files of the CA in mitmproxy-ca.pem (the one mitmproxy serves) that are missing."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    key_file = confdir / CA_KEY
    deadline = time.monotonic() + CA_WRITE_WAIT_S
    while True:
        if not rewrite and (confdir / CA_CERT).is_file():  # its writer finished
            return
        try:
            certificates = x509.load_pem_x509_certificates(key_file.read_bytes())
            break
        except (ValueError, OSError):  # still being written
            if time.monotonic() > deadline:
                raise click.ClickException(f"{key_file} holds no CA certificate: move it away and semula "
                                           "makes a new CA") from None
            time.sleep(0.05)
    pem = certificates[0].public_bytes(Encoding.PEM)
    for name in (CA_CERT, f"{CA_BASENAME}-ca-cert.cer"):
        if rewrite or not (confdir / name).is_file():
            partial = confdir / f"{CA_PARTIAL_PREFIX}{name}.{os.getpid()}.{threading.get_ident()}.tmp"
            partial.write_bytes(pem)
            os.replace(partial, confdir / name)


def confdir_of(sets: tuple[str, ...], default: Path | str = DEFAULT_CONFDIR) -> Path:
    """The confdir mitmproxy will use: the last `--set confdir=`, else default."""
    values = [item.split("=", 1)[1] for item in sets if item.startswith("confdir=")]
    return Path(values[-1] if values else default).expanduser()


def key_size_of(sets: tuple[str, ...]) -> int:
    values = [item.split("=", 1)[1] for item in sets if item.startswith("key_size=")]
    try:
        return int(values[-1]) if values else DEFAULT_KEY_SIZE
    except ValueError:
        raise click.BadParameter(f"key_size={values[-1]} is not a number", param_hint="--set") from None
