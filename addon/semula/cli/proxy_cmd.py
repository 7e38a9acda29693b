"""`semula proxy` and `semula env`: run the proxy and point clients at it (the how: `semula.session`)."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from semula.cli.common import data_dir_option
from semula.core.modes import Mode
from semula.providers import allow_hosts_regexes
from semula.proxy.run import lean
from semula.session.ca import DEFAULT_CONFDIR, confdir_of, ensure_ca, key_size_of
from semula.session.clientenv import (
    PLACEHOLDER_KEY, PROVIDER_KEY_GROUPS, client_env, command_sets, intercepted_hosts, intercepts_all, java_env,
    port_hint, port_in_use,
)

MODES = [m.value for m in Mode]


def proxy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True, envvar="SEMULA_MODE",
                     show_envvar=True),
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
        click.option("--mcp-server", "mcp_servers", multiple=True, metavar="HOST[:PORT][/PATH]",
                     help="record and replay this MCP server's Streamable HTTP traffic (JSON-RPC calls matched by "
                          "method and params; docs/mcp.md); repeatable"),
        click.option("--intercept-all", is_flag=True,
                     help="decrypt every HTTPS host (the others forwarded untouched, never recorded): a run's clients "
                          "then trust semula's CA alone, ~30 ms less per SDK client; breaks certificate pinning "
                          "and client certificates to other hosts (docs/performance.md)"),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="any mitmproxy or semula_* option, e.g. --set confdir=/tmp/conf"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


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
    # allow_hosts adds to these (a list option), it does not replace them. semula_intercept_all decrypts all.
    for regex in () if intercepts_all(sets) else allow_hosts_regexes(hosts):
        args += ["--set", f"allow_hosts={regex}"]
    for item in sets:
        args += ["--set", item]
    return args


class WithSemulaOptions(click.Command):
    """A command whose help ends with the addon's semula_* options, read from their declarations."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for option in declared_options():
            choices = f" ({'|'.join(option.choices)})" if option.choices else ""
            rows.append((f"{option.name}={_shown_default(option.default)}", f"{option.help}{choices}"))
        with formatter.section("semula options (--set semula_NAME=VALUE, e.g. --set semula_record_errors=true)"):
            formatter.write_dl(rows)
        super().format_epilog(ctx, formatter)


def declared_options() -> list[Any]:
    """The addon's semula_* options as it declares them (name, default, help, choices): this help and the
    docs site's option reference (scripts/docs/reference.py) read them here."""
    from semula.proxy.run.options import declared

    return list(declared())


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
@click.option("--parent-pid", type=int, default=None, hidden=True,
              help="the run that starts this proxy (semula exec, the pytest plugin): stop when it is gone")
def proxy(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str, recordings: Path | None,
          no_recordings: bool, extra_hosts: tuple[str, ...], mcp_servers: tuple[str, ...], intercept_all: bool,
          sets: tuple[str, ...], confdir: Path | None, web: bool, parent_pid: int | None) -> None:
    """Run the proxy (mitmdump, or mitmweb with --web) with the semula addon."""
    confdir_set = (f"confdir={confdir.expanduser()}",) if confdir else ()
    sets = command_sets(recordings, no_recordings, extra_hosts, mcp_servers, intercept_all) + confdir_set + sets
    refuse_bad_options(sets)
    args = mitmproxy_args(mode, listen_host, listen_port, data_dir, project, sets, web)
    _check_embeddings(data_dir, sets)
    # The CA before mitmproxy starts: it loads this one, and no client trusts another (ensure_ca).
    ca_dir = confdir_of(sets)
    try:
        ensure_ca(ca_dir, key_size_of(sets))
    except OSError as e:
        raise click.ClickException(f"cannot write the proxy's CA into {ca_dir}: {e}") from None
    lean.install()  # before mitmproxy's imports
    from mitmproxy.tools import main as mitm_main

    from semula.proxy.run import runinfo

    lean.remember_ca_key()
    lean.unchecked_messages()
    lean.quick_dispatch()

    runinfo.publish(runinfo.requested(mode, sets, parent_pid))
    if parent_pid:
        runinfo.watch_parent(parent_pid)
    bind = _BindFailure()
    logging.getLogger().addHandler(bind)
    try:
        code = (mitm_main.mitmweb if web else mitm_main.mitmdump)(args) or 0
    except SystemExit as e:  # mitmproxy exits by itself on a start-up error
        code = e.code if isinstance(e.code, int) else 1
    finally:
        logging.getLogger().removeHandler(bind)
    # Only a failure to bind is about the port: after another start-up error this process may still hold it.
    if code and bind.in_use and port_in_use(listen_host, listen_port):
        click.echo(port_hint(listen_host, listen_port), err=True)
    _exit_now(code)


def _exit_now(code: int) -> None:
    """Exit without tearing the interpreter down: mitmproxy's `done` hooks have flushed the call and
    review logs and closed the store and the admin endpoint, and what is left (freeing a heap that
    gc.freeze keeps, DuckDB's and pyarrow's modules and threads) took 0.5-1.5 s of every stop."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken console: nothing more to say there
            pass
    os._exit(code)


class _BindFailure(logging.Handler):
    """Notes whether mitmproxy said it could not listen because the address is in use."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.in_use = False

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().lower()
        self.in_use = self.in_use or ("failed to listen" in text and "in use" in text)


def refuse_bad_options(sets: tuple[str, ...]) -> None:
    """A misspelt or bad semula option (`--set`, SEMULA_* variables): one line, exit 2, nothing started."""
    from semula.session.optioncheck import OptionError, check_run_options

    try:
        check_run_options(sets, os.environ)
    except OptionError as e:
        click.echo(f"semula: {e}", err=True)
        sys.exit(2)


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
    exports: dict[str, str | None] = {**make(port, confdir, project, host)}
    for name, value in exports.items():
        click.echo(f"unset {name}" if value is None else f"export {name}={shlex.quote(value)}")
    if mode == Mode.REPLAY.value and not namespace_by_key:
        for group in PROVIDER_KEY_GROUPS:
            if not any(os.environ.get(n) for n in group):
                click.echo(_group_line(group))
        from semula.session.google_env import ADC_VARIABLE, placeholder_adc_file

        if not os.environ.get(ADC_VARIABLE):  # Vertex AI's clients: placeholder credentials (session/google_env.py)
            click.echo(f'if [ -z "${{{ADC_VARIABLE}:-}}" ]; then export '
                       f'{ADC_VARIABLE}={shlex.quote(str(placeholder_adc_file(confdir)))}; fi')


def _group_line(group: tuple[str, ...]) -> str:
    """Set the group's variables only when none is set in the shell (exported or not)."""
    unset = " && ".join(f'[ -z "${{{n}:-}}" ]' for n in group)
    return f"if {unset}; then export {group[0]}={PLACEHOLDER_KEY}; fi"
