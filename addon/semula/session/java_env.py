"""The JVM's way to the proxy: a truststore and a JAVA_TOOL_OPTIONS line (`semula env --format java`).

The JVM reads neither HTTPS_PROXY nor SSL_CERT_FILE, and mitmproxy's `.p12` holds its private key, not
a truststore. JAVA_TOOL_OPTIONS is read by every JVM a shell starts (Gradle and Maven and their forked
test JVMs, Kotlin, Scala), so one line carries the proxy properties and the truststore. The truststore
holds the JDK's own trusted CAs plus semula's: a store with only semula's CA would fail every other HTTPS
call (a Maven download, a database over TLS). keytool does the work, so the store is the JDK's own format.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import click

TRUSTSTORE = "semula-truststore.p12"
# Written beside the store: what it was built from, so a new CA or JDK store rebuilds it.
STAMP_SUFFIX = ".source"
# The JDK's own cacerts password; the store holds public certificates only.
TRUSTSTORE_PASSWORD = "changeit"
CA_ALIAS = "semula-mitmproxy-ca"
NON_PROXY_HOSTS = "localhost|127.*|[::1]"


class JavaUnavailable(click.ClickException):
    """No JDK (keytool and lib/security/cacerts) where semula looked."""


@dataclass(frozen=True)
class Jdk:
    home: Path
    keytool: Path
    cacerts: Path


def find_jdk(environ: dict[str, str] | os._Environ[str] = os.environ) -> Jdk:
    """The JDK that `java` on this shell runs: JAVA_HOME, else the `java.home` of the `java` on PATH."""
    java_home = environ.get("JAVA_HOME")
    if java_home:
        home, origin = Path(java_home), f"JAVA_HOME={java_home}"
    elif java := shutil.which("java", path=environ.get("PATH")):
        home, origin = _java_home(java), f"java on PATH ({java})"
    else:
        raise JavaUnavailable("semula env --format java needs a JDK: no JAVA_HOME and no `java` on PATH. "
                              "Install a JDK (e.g. apt-get install openjdk-17-jdk-headless) or set JAVA_HOME.")
    if not home.is_dir():
        raise JavaUnavailable(f"{origin}: {home} is not a folder. Point JAVA_HOME at a JDK (the folder with "
                              "bin/keytool), or unset it to use the `java` on PATH.")
    keytool = home / "bin" / "keytool"
    # JDK 9+ keeps cacerts in lib/security; a JDK 8 home has it under jre/.
    cacerts = next((c for c in (home / "lib/security/cacerts", home / "jre/lib/security/cacerts") if c.exists()),
                   home / "lib/security/cacerts")
    for needed in (keytool, cacerts):
        if not needed.exists():
            raise JavaUnavailable(f"no {needed.relative_to(home)} in the JDK of {origin} ({home}): "
                                  "a JRE without keytool? Point JAVA_HOME at a full JDK.")
    return Jdk(home, keytool, cacerts.resolve())


def _java_home(java: str) -> Path:
    """Where `java` really lives: launcher stubs (macOS's /usr/bin/java) are not its home."""
    try:
        res = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                             timeout=60)
        found = re.search(r"^\s*java\.home = (.+)$", res.stderr, re.MULTILINE)
    except (OSError, subprocess.TimeoutExpired):
        found = None
    return Path(found.group(1).strip()) if found else Path(java).resolve().parent.parent


def ensure_truststore(confdir: Path, ca: Path, jdk: Jdk) -> Path:
    """<confdir>/semula-truststore.p12: the JDK's CAs plus semula's, rebuilt when either changes."""
    store = confdir / TRUSTSTORE
    stamp = store.with_name(store.name + STAMP_SUFFIX)
    source = _source_line(ca, jdk)
    if store.exists() and stamp.exists() and stamp.read_text() == source:
        return store
    partial = store.with_name(f".{store.name}.{os.getpid()}.tmp")
    partial.unlink(missing_ok=True)
    try:
        _keytool(jdk, "-importkeystore", "-noprompt", "-srckeystore", str(jdk.cacerts),
                 "-srcstorepass", TRUSTSTORE_PASSWORD, "-destkeystore", str(partial), "-deststoretype", "PKCS12",
                 "-deststorepass", TRUSTSTORE_PASSWORD)
        _keytool(jdk, "-importcert", "-noprompt", "-alias", CA_ALIAS, "-file", str(ca),
                 "-keystore", str(partial), "-storetype", "PKCS12", "-storepass", TRUSTSTORE_PASSWORD)
        partial.replace(store)  # a JVM starting meanwhile sees the old store or the new one, never half
    finally:
        partial.unlink(missing_ok=True)
    stamp.write_text(source)
    return store


def _source_line(ca: Path, jdk: Jdk) -> str:
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    return f"ca {digest(ca)} jdk {jdk.cacerts} {digest(jdk.cacerts)}\n"


def _keytool(jdk: Jdk, *args: str) -> None:
    res = subprocess.run([str(jdk.keytool), *args], capture_output=True, text=True)
    if res.returncode != 0:
        output = (res.stdout + res.stderr).strip()
        raise click.ClickException(f"keytool {args[0]} failed building the Java truststore: {output}")


def java_tool_options(host: str, port: int, truststore: Path) -> str:
    """The JAVA_TOOL_OPTIONS value: proxy properties for http and https, and the truststore."""
    if any(c.isspace() for c in str(truststore)):
        raise click.ClickException(f"the truststore path {truststore} has a space, which JAVA_TOOL_OPTIONS "
                                   "splits on: pick a --confdir without spaces")
    properties = {
        "https.proxyHost": host, "https.proxyPort": str(port),
        "http.proxyHost": host, "http.proxyPort": str(port),
        "http.nonProxyHosts": NON_PROXY_HOSTS,
        "javax.net.ssl.trustStore": str(truststore),
        "javax.net.ssl.trustStorePassword": TRUSTSTORE_PASSWORD,
        "javax.net.ssl.trustStoreType": "PKCS12",
    }
    return " ".join(f"-D{name}={value}" for name, value in properties.items())
