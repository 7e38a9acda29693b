"""`semula proxy`, `semula env` and `semula exec`: run the proxy and point clients at it."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click

from semula.cli.aws_env import aws_placeholders
from semula.cli.common import data_dir_option
from semula.core.modes import Mode
from semula.providers import DEFAULT_PROVIDER_HOSTS, allow_hosts_regexes

MODES = [m.value for m in Mode]
DEFAULT_CONFDIR = "~/.mitmproxy"


def proxy_options(func):
    for option in reversed([
        click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True),
        click.option("--listen-host", default="127.0.0.1", show_default=True),
        data_dir_option,
        click.option("--project", default="default", show_default=True,
                     help="the project of calls that name none (no proxy user name P:semula@, no x-semula-project "
                          "header): one proxy per project serves clients like the JVM that send neither"),
        click.option("--recordings", "recordings", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="recordings folder to commit [default: ./semula-recordings, or $SEMULA_RECORDINGS]"),
        click.option("--no-recordings", is_flag=True, help="keep recordings in the data dir's store only"),
        click.option("--extra-host", "extra_hosts", multiple=True, metavar="HOST",
                     help="also intercept HOST (exact or *.suffix), keeping the default hosts: an OpenAI-compatible "
                          "API, or a CDN a test needs offline (recorded by exact match); repeatable"),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="any mitmproxy or semula_* option, e.g. --set confdir=/tmp/conf"),
    ]):
        func = option(func)
    return func


def extra_host_sets(extra_hosts: tuple[str, ...]) -> tuple[str, ...]:
    """`--extra-host H` as the option it sets (`--set semula_extra_hosts=H`)."""
    return tuple(f"semula_extra_hosts={host}" for host in extra_hosts)


def intercepted_hosts(sets: tuple[str, ...]) -> tuple[str, ...]:
    """The hosts the proxy will intercept: semula_hosts (else the defaults) plus semula_extra_hosts."""
    from semula.proxy.options import host_list

    hosts = [s.split("=", 1)[1] for s in sets if s.startswith("semula_hosts=")] or list(DEFAULT_PROVIDER_HOSTS)
    return host_list(hosts, [s.split("=", 1)[1] for s in sets if s.startswith("semula_extra_hosts=")])


def recordings_sets(recordings: Path | None, no_recordings: bool) -> tuple[str, ...]:
    if no_recordings:
        return ("semula_recordings=off",)
    return (f"semula_recordings={recordings.expanduser().resolve()}",) if recordings else ()


def mitmproxy_args(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                   sets: tuple[str, ...], web: bool) -> list[str]:
    from semula import mitm_addon

    hosts = intercepted_hosts(sets)
    args = ["--listen-host", listen_host, "--listen-port", str(listen_port),
            "-s", str(Path(mitm_addon.__file__).resolve())]
    own = [
        # A replay needs no DNS or network: connect upstream only when a request goes there.
        "connection_strategy=lazy",
        # mitmproxy's own flow lines print full URLs (Gemini's ?key=): semula prints its own.
        "flow_detail=0",
        f"semula_mode={mode}",
        f"semula_data_dir={data_dir.expanduser().resolve()}",
        f"semula_project={project}",
    ]
    if web:
        own.append("web_open_browser=false")
        # The flow list shows each call's decision (the flow comment) without opening the flow.
        own += [f"web_columns={column}" for column in ("tls", "icon", "path", "method", "status", "size", "time",
                                                       "comment")]
    for item in sets:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--set")
    # The user's --set wins over semula's own value of the same option (mitmproxy refuses a second
    # value of a single-valued option: "Received multiple values").
    named = {item.split("=", 1)[0] for item in sets}
    for item in own:
        if item.split("=", 1)[0] not in named:
            args += ["--set", item]
    # Decrypt only provider hosts: other traffic and certificate pinning keep working. A user's
    # allow_hosts adds to these (a list option), it does not replace them.
    for regex in allow_hosts_regexes(hosts):
        args += ["--set", f"allow_hosts={regex}"]
    for item in sets:
        args += ["--set", item]
    return args


class WithSemulaOptions(click.Command):
    """A command whose help ends with the addon's semula_* options, read from their declarations."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from semula.proxy.options import declared

        rows = []
        for option in declared():
            choices = f" ({'|'.join(option.choices)})" if option.choices else ""
            rows.append((f"{option.name}={_shown_default(option.default)}", f"{option.help}{choices}"))
        with formatter.section("semula options (--set semula_NAME=VALUE, e.g. --set semula_record_errors=true)"):
            formatter.write_dl(rows)
        super().format_epilog(ctx, formatter)


def _shown_default(value: object) -> str:
    """A default as `--set` takes it: true/false, a list comma-separated (long ones cut)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value) if len(value) <= 2 else f"{','.join(value[:2])},… ({len(value)} hosts)"
    return str(value)


@click.command(cls=WithSemulaOptions)
@proxy_options
@click.option("--listen-port", type=int, default=8080, show_default=True)
@click.option("--confdir", type=click.Path(path_type=Path), default=None,
              help=f"mitmproxy's confdir, where its CA lives [default: {DEFAULT_CONFDIR}]")
@click.option("--web", is_flag=True, help="run mitmweb (the web UI shows each call's decision)")
def proxy(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str, recordings: Path | None,
          no_recordings: bool, extra_hosts: tuple[str, ...], sets: tuple[str, ...], confdir: Path | None,
          web: bool) -> None:
    """Run the proxy (mitmdump, or mitmweb with --web) with the semula addon."""
    confdir_set = (f"confdir={confdir.expanduser()}",) if confdir else ()
    sets = recordings_sets(recordings, no_recordings) + extra_host_sets(extra_hosts) + confdir_set + sets
    args = mitmproxy_args(mode, listen_host, listen_port, data_dir, project, sets, web)
    _check_embeddings(data_dir, sets)
    # The CA before mitmproxy starts: it loads this one, and no client trusts another (ensure_ca).
    ca_dir = confdir_of(sets)
    try:
        ensure_ca(ca_dir, key_size_of(sets))
    except OSError as e:
        raise click.ClickException(f"cannot write the proxy's CA into {ca_dir}: {e}") from None
    from mitmproxy.tools import main as mitm_main

    try:
        code = (mitm_main.mitmweb if web else mitm_main.mitmdump)(args) or 0
    except SystemExit as e:  # mitmproxy exits by itself on a start-up error
        code = e.code if isinstance(e.code, int) else 1
    if code and port_in_use(listen_host, listen_port):
        click.echo(port_hint(listen_host, listen_port), err=True)
    sys.exit(code)


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


def _check_embeddings(data_dir: Path, sets: tuple[str, ...]) -> None:
    """With the embedding tier on, a missing extra or model refuses to start, before mitmproxy does."""
    from semula.core.settings import parse_switch

    option = [s.split("=", 1)[1] for s in sets if s.startswith("semula_embeddings=")]
    try:
        enabled = (parse_switch("semula_embeddings", option[-1]) if option
                   else parse_switch("SEMULA_EMBEDDINGS", os.environ.get("SEMULA_EMBEDDINGS")))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if not enabled:
        return
    from semula.embeddings.model import Embedder, EmbeddingsUnavailable, config_from_env

    try:
        Embedder.load(config_from_env(data_dir.expanduser().resolve(), option_enabled=True))
    except (EmbeddingsUnavailable, ValueError) as e:
        raise click.ClickException(f"the embedding tier is on (SEMULA_EMBEDDINGS) but {e}") from None


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


def proxy_url(host: str, port: int, project: str | None = None, password: str = "semula") -> str:
    # The password is ignored; undici (Node) sends proxy credentials only when both are set.
    user = f"{project}:{password}@" if project else ""
    return f"http://{user}{host}:{port}"


def client_env(port: int, confdir: Path, project: str | None = None, host: str = "127.0.0.1",
               password: str = "semula") -> dict[str, str]:
    """The variables each ecosystem reads to use the proxy and trust its CA.

    The password picks no project; one that starts with `semula-` tags the calls (the pytest plugin
    tells its xdist workers' refusals apart by it)."""
    import certifi

    confdir = confdir.expanduser()
    ca = ensure_ca(confdir)
    bundle = confdir / "semula-ca-bundle.pem"
    # Written aside and renamed: a client of another run (an xdist worker) never reads half a file.
    partial = bundle.with_name(f"{bundle.name}.{os.getpid()}.tmp")
    partial.write_text(Path(certifi.where()).read_text() + "\n" + ca.read_text())
    os.replace(partial, bundle)
    url = proxy_url(host, port, project, password)
    no_proxy = "localhost,127.0.0.1,::1"
    return {
        "HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
        "NO_PROXY": no_proxy, "no_proxy": no_proxy,
        "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle), "CURL_CA_BUNDLE": str(bundle),
        "NODE_EXTRA_CA_CERTS": str(bundle), "GIT_SSL_CAINFO": str(bundle), "AWS_CA_BUNDLE": str(bundle),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(bundle),
        # Node >= 22.21 honours the proxy variables only with this; Node 20 ignores them
        # (certs_readme.md: use undici's EnvHttpProxyAgent there).
        "NODE_USE_ENV_PROXY": "1",
    }


# Replay needs no real key, but SDKs refuse to start without one: CI gets a placeholder for each
# provider whose variables are all unset. A group shares one placeholder decision (google-genai
# prefers GOOGLE_API_KEY over GEMINI_API_KEY: a placeholder must never shadow a real key), and only
# its first name gets the placeholder: google-genai warns "Both GOOGLE_API_KEY and GEMINI_API_KEY
# are set" when both are. GEMINI_API_KEY is the name Google's Gemini API docs use; google-genai reads
# either, and some of litellm's Gemini paths read only GEMINI_API_KEY.
PLACEHOLDER_KEY = "sk-semula-replay-placeholder"
PROVIDER_KEY_GROUPS: tuple[tuple[str, ...], ...] = (
    ("OPENAI_API_KEY",), ("ANTHROPIC_API_KEY",), ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    ("AZURE_OPENAI_API_KEY",), ("MISTRAL_API_KEY",), ("GROQ_API_KEY",), ("OPENROUTER_API_KEY",),
    ("TOGETHER_API_KEY",), ("DEEPSEEK_API_KEY",), ("XAI_API_KEY",),
)


def placeholder_keys(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """Placeholder API keys for the providers none of whose key variables is set (the group's first name),
    and placeholder AWS credentials when the user has none (`aws_env.py`)."""
    keys = {group[0]: PLACEHOLDER_KEY for group in PROVIDER_KEY_GROUPS if not any(environ.get(n) for n in group)}
    return {**keys, **aws_placeholders(environ)}


def namespace_by_key(sets: tuple[str, ...]) -> bool:
    """With semula_namespace_by_key on, the key picks the namespace: a placeholder would pick a wrong one."""
    from semula.core.settings import parse_switch

    values = [s.split("=", 1)[1] for s in sets if s.startswith("semula_namespace_by_key=")]
    try:
        return bool(values) and parse_switch("semula_namespace_by_key", values[-1])
    except ValueError:
        return True  # unsure: set no placeholder


@click.command()
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--confdir", type=click.Path(path_type=Path), default=DEFAULT_CONFDIR, show_default=True)
@click.option("--project", default=None,
              help="send calls to this project (proxy URL http://P:semula@host:port; not with --format java)")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="the proxy's mode; replay also exports placeholder API keys for the unset ones")
@click.option("--namespace-by-key", is_flag=True, help="the proxy runs with semula_namespace_by_key: no placeholders")
@click.option("--format", "output_format", type=click.Choice(["sh", "java"]), default="sh", show_default=True,
              help="sh: HTTPS_PROXY, CA bundles … (curl, Python, Node, Go); java: JAVA_TOOL_OPTIONS with the proxy "
                   "properties and a truststore (the JDK's CAs + semula's) written into the confdir")
def env(port: int, host: str, confdir: Path, project: str | None, mode: str | None, namespace_by_key: bool,
        output_format: str) -> None:
    """Print shell exports that point clients at the proxy: eval "$(semula env)".

    JVM languages (Java, Kotlin, Gradle, Maven): eval "$(semula env --format java)".
    """
    make = client_env if output_format == "sh" else java_env
    exports = make(port, confdir, project, host)
    for name, value in exports.items():
        click.echo(f"export {name}={shlex.quote(value)}")
    if mode == Mode.REPLAY.value and not namespace_by_key:
        for group in PROVIDER_KEY_GROUPS:
            if not any(os.environ.get(n) for n in group):
                click.echo(_group_line(group))
        from semula.cli.google_env import ADC_VARIABLE, placeholder_adc_file

        if not os.environ.get(ADC_VARIABLE):  # Vertex AI's clients: placeholder credentials (cli/google_env.py)
            click.echo(f'if [ -z "${{{ADC_VARIABLE}:-}}" ]; then export '
                       f'{ADC_VARIABLE}={shlex.quote(str(placeholder_adc_file(confdir)))}; fi')


def java_env(port: int, confdir: Path, project: str | None = None, host: str = "127.0.0.1") -> dict[str, str]:
    """JAVA_TOOL_OPTIONS: every JVM started with it uses the proxy and trusts its CA (java_env.py)."""
    from semula.cli.java_env import ensure_truststore, find_jdk, java_tool_options

    if project:
        # The JVM sends proxy credentials only after a 407 challenge, which semula never sends.
        raise click.UsageError("--project does not reach semula from a JVM (it sends no proxy user name "
                               "unasked): run the proxy with --project P (semula proxy/exec --project P), or send "
                               "the header x-semula-project: P")
    confdir = confdir.expanduser()
    truststore = ensure_truststore(confdir, ensure_ca(confdir), find_jdk())
    return {"JAVA_TOOL_OPTIONS": java_tool_options(host, port, truststore.resolve())}


def _group_line(group: tuple[str, ...]) -> str:
    """Set the group's variables only when none is set in the shell (exported or not)."""
    unset = " && ".join(f'[ -z "${{{n}:-}}" ]' for n in group)
    return f"if {unset}; then export {group[0]}={PLACEHOLDER_KEY}; fi"
