"""`semula proxy`, `semula env` and `semula exec`: run the proxy and point clients at it."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from semula.proxy.admin import read_admin_info
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
        click.option("--project", default="default", show_default=True, help="default project (namespace)"),
        click.option("--recordings", "recordings", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="recordings folder to commit [default: ./semula-recordings, or $SEMULA_RECORDINGS]"),
        click.option("--no-recordings", is_flag=True, help="keep recordings in the data dir's store only"),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="any mitmproxy or semula_* option, e.g. --set confdir=/tmp/conf"),
    ]):
        func = option(func)
    return func


def recordings_sets(recordings: Path | None, no_recordings: bool) -> tuple[str, ...]:
    if no_recordings:
        return ("semula_recordings=off",)
    return (f"semula_recordings={recordings.expanduser().resolve()}",) if recordings else ()


def mitmproxy_args(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                   sets: tuple[str, ...], web: bool) -> list[str]:
    from semula import mitm_addon

    hosts = [s.split("=", 1)[1] for s in sets if s.startswith("semula_hosts=")] or list(DEFAULT_PROVIDER_HOSTS)
    args = [
        "--listen-host", listen_host, "--listen-port", str(listen_port),
        "-s", str(Path(mitm_addon.__file__).resolve()),
        # A replay needs no DNS or network: connect upstream only when a request goes there.
        "--set", "connection_strategy=lazy",
        # mitmproxy's own flow lines print full URLs (Gemini's ?key=): semula prints its own.
        "--set", "flow_detail=0",
        "--set", f"semula_mode={mode}",
        "--set", f"semula_data_dir={data_dir.expanduser().resolve()}",
        "--set", f"semula_project={project}",
    ]
    # Decrypt only provider hosts: other traffic and certificate pinning keep working.
    for regex in allow_hosts_regexes(hosts):
        args += ["--set", f"allow_hosts={regex}"]
    if web:
        args += ["--set", "web_open_browser=false"]
    for item in sets:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--set")
        args += ["--set", item]
    return args


@click.command()
@proxy_options
@click.option("--listen-port", type=int, default=8080, show_default=True)
@click.option("--web", is_flag=True, help="run mitmweb (the web UI shows each call's decision)")
def proxy(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str, recordings: Path | None,
          no_recordings: bool, sets: tuple[str, ...], web: bool) -> None:
    """Run the proxy (mitmdump, or mitmweb with --web) with the semula addon."""
    sets = recordings_sets(recordings, no_recordings) + sets
    args = mitmproxy_args(mode, listen_host, listen_port, data_dir, project, sets, web)
    _check_embeddings(data_dir, sets)
    from mitmproxy.tools import main as mitm_main

    sys.exit((mitm_main.mitmweb if web else mitm_main.mitmdump)(args) or 0)


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


def ensure_ca(confdir: Path) -> Path:
    """mitmproxy's CA certificate, created the way mitmproxy creates it if the proxy never ran."""
    ca = confdir / "mitmproxy-ca-cert.pem"
    if not ca.exists():
        from mitmproxy.certs import CertStore

        confdir.mkdir(parents=True, exist_ok=True)
        CertStore.from_store(str(confdir), "mitmproxy", 2048)
    return ca


def client_env(port: int, confdir: Path, project: str | None = None, host: str = "127.0.0.1") -> dict[str, str]:
    """The variables each ecosystem reads to use the proxy and trust its CA."""
    import certifi

    confdir = confdir.expanduser()
    ca = ensure_ca(confdir)
    bundle = confdir / "semula-ca-bundle.pem"
    bundle.write_text(Path(certifi.where()).read_text() + "\n" + ca.read_text())
    # The password is ignored; undici (Node) sends proxy credentials only when both are set.
    user = f"{project}:semula@" if project else ""
    proxy_url = f"http://{user}{host}:{port}"
    no_proxy = "localhost,127.0.0.1,::1"
    return {
        "HTTPS_PROXY": proxy_url, "HTTP_PROXY": proxy_url, "https_proxy": proxy_url, "http_proxy": proxy_url,
        "NO_PROXY": no_proxy, "no_proxy": no_proxy,
        "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle), "CURL_CA_BUNDLE": str(bundle),
        "NODE_EXTRA_CA_CERTS": str(bundle), "GIT_SSL_CAINFO": str(bundle), "AWS_CA_BUNDLE": str(bundle),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(bundle),
        # Node >= 22.21 honours the proxy variables only with this; Node 20 ignores them
        # (certs_readme.md: use undici's EnvHttpProxyAgent there).
        "NODE_USE_ENV_PROXY": "1",
    }


@click.command()
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--confdir", type=click.Path(path_type=Path), default=DEFAULT_CONFDIR, show_default=True)
@click.option("--project", default=None, help="send calls to this project (proxy user name)")
def env(port: int, host: str, confdir: Path, project: str | None) -> None:
    """Print shell exports that point clients at the proxy: eval "$(semula env)"."""
    for name, value in client_env(port, confdir, project, host).items():
        click.echo(f"export {name}={shlex.quote(value)}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _confdir_from(sets: tuple[str, ...]) -> Path:
    for item in sets:
        if item.startswith("confdir="):
            return Path(item.split("=", 1)[1]).expanduser()
    return Path(DEFAULT_CONFDIR).expanduser()


def _pump(stream, sink) -> None:
    for line in stream:
        sink.write(line)
        sink.flush()


@click.command("exec", context_settings={"ignore_unknown_options": True})
@proxy_options
@click.option("--listen-port", type=int, default=0, help="0: a free port")
@click.option("--ready-timeout", type=float, default=60.0, show_default=True)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                 recordings: Path | None, no_recordings: bool, sets: tuple[str, ...], ready_timeout: float,
                 cmd: tuple[str, ...]) -> None:
    """Run CMD with a proxy around it; exit with CMD's exit code: semula exec --mode replay -- pytest."""
    sets = recordings_sets(recordings, no_recordings) + sets
    confdir = _confdir_from(sets)
    info = read_admin_info(data_dir)
    process = None
    if info is not None:
        port = int(info["proxy"].rsplit(":", 1)[1])
        confdir = Path(info.get("confdir") or confdir)  # trust the CA of the proxy actually running
        if info.get("mode") != mode:
            click.echo(f"semula: reusing the proxy already running on {data_dir} (mode {info.get('mode')}, "
                       f"not {mode})", err=True)
        else:
            click.echo(f"semula: reusing the proxy already running on {data_dir} at {info['proxy']}", err=True)
    else:
        port = listen_port or free_port()
        args = [sys.executable, "-m", "semula", "proxy", "--mode", mode, "--listen-host", listen_host,
                "--listen-port", str(port), "--data-dir", str(data_dir), "--project", project]
        for item in sets:
            args += ["--set", item]
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        deadline = time.monotonic() + ready_timeout
        seen: list[str] = []
        assert process.stdout is not None
        while True:
            line = process.stdout.readline()
            if line:
                seen.append(line)
                sys.stderr.write(line)
                if line.startswith("semula ready:"):
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                _stop(process)
                raise click.ClickException("the proxy did not start:\n" + "".join(seen[-20:]))
        threading.Thread(target=_pump, args=(process.stdout, sys.stderr), daemon=True).start()
    environment = {**os.environ, **client_env(port, confdir, None if project == "default" else project, listen_host)}
    try:
        result = subprocess.run(list(cmd), env=environment)
        code = result.returncode
    except FileNotFoundError:
        click.echo(f"semula: command not found: {cmd[0]}", err=True)
        code = 127
    except KeyboardInterrupt:
        code = 130
    finally:
        if process is not None:
            _stop(process)
    sys.exit(code)


def _stop(process: subprocess.Popen) -> None:
    """SIGINT lets mitmproxy run its `done` hooks: the call log is flushed before exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
