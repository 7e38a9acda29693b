"""What a run's clients need to reach the proxy: the proxy URL, the variables each ecosystem reads
(proxy, CA bundle, JVM options), placeholder API keys for replay, and the `--set` lines a run gives
the proxy (extra hosts, recordings folder).
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import click

from semula.providers import DEFAULT_PROVIDER_HOSTS, KEY_VARIABLE_GROUPS
from semula.session.aws_env import AWS_GROUPS, aws_placeholders
from semula.session import trust
from semula.session.ca import ensure_ca

def extra_host_sets(extra_hosts: tuple[str, ...]) -> tuple[str, ...]:
    """`--extra-host H` as the option it sets (`--set semula_extra_hosts=H`)."""
    return tuple(f"semula_extra_hosts={host}" for host in extra_hosts)


def mcp_server_sets(servers: tuple[str, ...]) -> tuple[str, ...]:
    """`--mcp-server S` as the option it sets (`--set semula_mcp_servers=S`)."""
    return tuple(f"semula_mcp_servers={server}" for server in servers)


def intercepted_hosts(sets: tuple[str, ...]) -> tuple[str, ...]:
    """The hosts the proxy will intercept: semula_hosts (else the defaults) plus semula_extra_hosts and the
    MCP servers' hosts (semula_mcp_servers)."""
    from semula.proxy.run.options import host_list, mcp_hosts, split_items

    hosts = [s.split("=", 1)[1] for s in sets if s.startswith("semula_hosts=")] or list(DEFAULT_PROVIDER_HOSTS)
    servers = tuple(split_items([s.split("=", 1)[1] for s in sets if s.startswith("semula_mcp_servers=")]))
    try:
        extra_mcp = mcp_hosts(servers)
    except ValueError:
        extra_mcp = []  # the proxy names the bad entry when it reads its options
    return host_list(hosts, [*(s.split("=", 1)[1] for s in sets if s.startswith("semula_extra_hosts=")), *extra_mcp])


def command_sets(recordings: Path | None, no_recordings: bool, extra_hosts: tuple[str, ...],
                 mcp_servers: tuple[str, ...], intercept_all: bool) -> tuple[str, ...]:
    """The options `semula proxy` and `semula exec` give for their own flags, before the user's `--set`s."""
    return (recordings_sets(recordings, no_recordings) + extra_host_sets(extra_hosts) + mcp_server_sets(mcp_servers)
            + (("semula_intercept_all=true",) if intercept_all else ()))


def recordings_sets(recordings: Path | None, no_recordings: bool) -> tuple[str, ...]:
    if no_recordings:
        return ("semula_recordings=off",)
    return (f"semula_recordings={recordings.expanduser().resolve()}",) if recordings else ()


def port_in_use(host: str, port: int) -> bool:
    """Whether something else listens on host:port (the reason mitmproxy could not bind)."""
    if not port:
        return False
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def port_hint(host: str, port: int) -> str:
    # mitmproxy's own message suggests `--mode regular@PORT`, which is not semula's --mode.
    return (f"semula: {host}:{port} is already in use: pick another port with --listen-port PORT "
            "(not mitmproxy's `--mode regular@PORT`: semula's --mode is auto|replay|record|passthrough)")


def proxy_url(host: str, port: int, project: str | None = None, password: str = "semula") -> str:
    # The password is ignored; undici (Node) sends proxy credentials only when both are set.
    user = f"{project}:{password}@" if project else ""
    return f"http://{user}{host}:{port}"


def plain_http_possible(sets: tuple[str, ...]) -> bool:
    """Whether a run's clients may reach an intercepted host over plain HTTP: only when it intercepts
    more than the built-in providers' hosts, which all speak HTTPS (an OpenAI-compatible server, an MCP
    server or semula_hosts of the user's own)."""
    return set(intercepted_hosts(sets)) != set(DEFAULT_PROVIDER_HOSTS)


def intercepts_all(sets: tuple[str, ...]) -> bool:
    """Whether a run's proxy decrypts every HTTPS host (`semula_intercept_all`, its last value)."""
    values = [s.split("=", 1)[1].strip().lower() for s in sets if s.split("=", 1)[0].strip() == "semula_intercept_all"]
    return bool(values) and values[-1] == "true"


def client_env(port: int, confdir: Path, project: str | None = None, host: str = "127.0.0.1",
               password: str = "semula", plain_http: bool = True, ca_only: bool = False) -> dict[str, str | None]:
    """The variables each ecosystem reads to use the proxy and trust its CA; None: unset it (`applied`).

    The password picks no project; one that starts with `semula-` tags the calls (the pytest plugin
    tells its xdist workers' refusals apart by it). `plain_http=False` (a run that intercepts only HTTPS
    hosts, `plain_http_possible`) leaves HTTP_PROXY and http_proxy alone: httpx builds one SSL context
    for every proxy variable it finds, and a plain-HTTP call would not be semula's anyway.

    Trust (trust.py): a client that reads a directory gets the hashed one, read lazily, and `SSL_CERT_FILE`
    is unset, since httpx prefers it to `SSL_CERT_DIR` and loads it whole for each context (~30 ms a client
    made per test); the file-only clients get the bundle. `ca_only` (a proxy that decrypts every HTTPS
    host, `intercepts_all`): every file holds semula's CA alone."""
    confdir = confdir.expanduser()
    ca = ensure_ca(confdir)
    url = proxy_url(host, port, project, password)
    no_proxy = "localhost,127.0.0.1,::1"
    proxies = {"HTTPS_PROXY": url, "https_proxy": url, **({"HTTP_PROXY": url, "http_proxy": url} if plain_http else {})}
    if ca_only:
        bundle = trust.ca_only_file(confdir, ca)
        readers: dict[str, str | None] = {"SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle)}
    else:
        bundle = trust.bundle_file(confdir, ca)
        directory = str(trust.hashed_directory(confdir, bundle))
        readers = {"SSL_CERT_FILE": None, "SSL_CERT_DIR": directory, "REQUESTS_CA_BUNDLE": directory}
    return {
        **proxies,
        "NO_PROXY": no_proxy, "no_proxy": no_proxy,
        **readers, "CURL_CA_BUNDLE": str(bundle),
        "NODE_EXTRA_CA_CERTS": str(bundle), "GIT_SSL_CAINFO": str(bundle), "AWS_CA_BUNDLE": str(bundle),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(bundle),
        # Node >= 22.21 honours the proxy variables only with this; Node 20 ignores them
        # (certs_readme.md: use undici's EnvHttpProxyAgent there).
        "NODE_USE_ENV_PROXY": "1",
    }


def applied(environ: Mapping[str, str], env: Mapping[str, str | None]) -> dict[str, str]:
    """environ with a run's variables set, and those it names None removed."""
    return {name: value for name, value in {**environ, **env}.items() if value is not None}


# Replay needs no real key, but SDKs refuse to start without one: CI gets a placeholder for each
# provider none of whose key variables is set. A group is every variable one provider's clients read
# a credential from, and only its first name gets the placeholder, so a client never sees two of them:
# google-genai warns "Both GOOGLE_API_KEY and GEMINI_API_KEY are set" (and uses GOOGLE_API_KEY), the
# Anthropic SDK sends both x-api-key and a bearer token with ANTHROPIC_AUTH_TOKEN, Azure's client an
# api-key beside AZURE_OPENAI_AD_TOKEN. Google's is GOOGLE_API_KEY, the name google-genai reads first:
# a suite that sets it later replaces the placeholder instead of adding a second variable (litellm and
# langchain read it too). One the suite sets that is not the first name (GEMINI_API_KEY) the pytest
# plugin sees before the next fixture or test and withdraws the placeholder (`shadowed_placeholders`).
PLACEHOLDER_KEY = "sk-semula-replay-placeholder"
PROVIDER_KEY_GROUPS = KEY_VARIABLE_GROUPS  # declared by the adapters (`Adapter.key_variables`)


def placeholder_keys(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """Placeholder API keys for the providers none of whose key variables is set (the group's first name),
    and placeholder AWS credentials when the user has none (`aws_env.py`)."""
    keys = {group[0]: PLACEHOLDER_KEY for group in PROVIDER_KEY_GROUPS if not any(environ.get(n) for n in group)}
    return {**keys, **aws_placeholders(environ)}


def placeholder_groups() -> tuple[tuple[str, ...], ...]:
    """Every group of variables a placeholder stands in for: the API keys and AWS's (credentials, region)."""
    return (*PROVIDER_KEY_GROUPS, *AWS_GROUPS)


def shadowed_placeholders(placed: Mapping[str, str], environ: Mapping[str, str]) -> list[str]:
    """The placeholders still set whose group now holds a value someone else set: to withdraw."""
    out: list[str] = []
    for group in placeholder_groups():
        ours = [n for n in group if n in placed and environ.get(n) == placed[n]]
        if ours and any(environ.get(n) and n not in ours for n in group):
            out += ours
    return out


def missing_placeholders(placed: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The placeholders withdrawn earlier whose group is empty again: to set again."""
    out: dict[str, str] = {}
    for group in placeholder_groups():
        if not any(environ.get(n) for n in group):
            out.update({n: placed[n] for n in group if n in placed})
    return out


def namespace_by_key(sets: tuple[str, ...]) -> bool:
    """With semula_namespace_by_key on, the key picks the namespace: a placeholder would pick a wrong one."""
    from semula.core.settings import parse_switch

    values = [s.split("=", 1)[1] for s in sets if s.startswith("semula_namespace_by_key=")]
    try:
        return bool(values) and parse_switch("semula_namespace_by_key", values[-1])
    except ValueError:
        return True  # unsure: set no placeholder


def java_env(port: int, confdir: Path, project: str | None = None, host: str = "127.0.0.1") -> dict[str, str]:
    """JAVA_TOOL_OPTIONS: every JVM started with it uses the proxy and trusts its CA (java_env.py)."""
    from semula.session.java_env import ensure_truststore, find_jdk, java_tool_options

    if project:
        # The JVM sends proxy credentials only after a 407 challenge, which semula never sends.
        raise click.UsageError("--project does not reach semula from a JVM (it sends no proxy user name "
                               "unasked): run the proxy with --project P (semula proxy/exec --project P), or send "
                               "the header x-semula-project: P")
    confdir = confdir.expanduser()
    truststore = ensure_truststore(confdir, ensure_ca(confdir), find_jdk())
    return {"JAVA_TOOL_OPTIONS": java_tool_options(host, port, truststore.resolve())}
