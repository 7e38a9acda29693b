"""Finding the JDK and the JAVA_TOOL_OPTIONS line, on folders laid out like JDKs (the real JDK: e2e)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from semula.session.java_env import JavaUnavailable, find_jdk, java_tool_options


def fake_jdk(root: Path, cacerts: str = "lib/security/cacerts", keytool: bool = True) -> Path:
    for relative in [cacerts] + (["bin/keytool"] if keytool else []):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("")
    return root


@pytest.mark.parametrize("layout", ["lib/security/cacerts", "jre/lib/security/cacerts"])  # JDK 9+, JDK 8
def test_java_home_names_the_jdk(tmp_path: Path, layout: str) -> None:
    home = fake_jdk(tmp_path / "jdk", layout)
    jdk = find_jdk({"JAVA_HOME": str(home), "PATH": ""})
    assert (jdk.keytool, jdk.cacerts) == (home / "bin/keytool", (home / layout).resolve())


@pytest.mark.parametrize(("environ", "needles"), [
    ({"PATH": ""}, ("no JAVA_HOME", "`java` on PATH", "Install a JDK")),
    ({"JAVA_HOME": "{jre}", "PATH": ""}, ("bin/keytool", "JAVA_HOME=", "full JDK")),
    ({"JAVA_HOME": "{jre}/missing", "PATH": ""}, ("is not a folder", "JAVA_HOME")),
])
def test_no_jdk_says_what_to_do(tmp_path: Path, environ: dict[str, str], needles: tuple[str, ...]) -> None:
    jre = fake_jdk(tmp_path / "jre", keytool=False)
    with pytest.raises(JavaUnavailable) as raised:
        find_jdk({k: v.format(jre=jre) for k, v in environ.items()})
    for needle in needles:
        assert needle in raised.value.message, raised.value.message


def test_tool_options_carry_the_proxy_for_both_schemes_and_the_truststore() -> None:
    options = java_tool_options("127.0.0.1", 8080, Path("/conf/semula-truststore.p12")).split()
    assert {"-Dhttps.proxyHost=127.0.0.1", "-Dhttps.proxyPort=8080", "-Dhttp.proxyHost=127.0.0.1",
            "-Dhttp.proxyPort=8080", "-Djavax.net.ssl.trustStore=/conf/semula-truststore.p12",
            "-Djavax.net.ssl.trustStorePassword=changeit", "-Djavax.net.ssl.trustStoreType=PKCS12"} <= set(options)


def test_a_truststore_path_with_a_space_is_refused() -> None:
    """JAVA_TOOL_OPTIONS splits on whitespace: the JVM would read half a path."""
    with pytest.raises(click.ClickException, match="--confdir"):
        java_tool_options("127.0.0.1", 8080, Path("/my conf/semula-truststore.p12"))
