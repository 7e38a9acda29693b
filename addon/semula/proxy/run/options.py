"""The addon's mitmproxy options, declared once, and the frozen settings built from them.

`configure` validates what changed and raises `OptionsError` with the valid values; the core
never reads `ctx.options`, it receives `AddonSettings`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy import exceptions

from semula.core.modes import Mode
from semula.core.settings import (DEFAULT_PROJECT, AddonSettings, SettingsError, parse_setting, parse_switch,
                                  validate_project)
from semula.providers import DEFAULT_PROVIDER_HOSTS
from semula.recordings.location import DEFAULT_RECORDINGS, recordings_location
from semula.store.selection import server_url


REPEATS = ("one", "sequence")
REPEATS_EXHAUSTED = ("last", "refuse")


def _embeddings_default() -> bool:
    try:
        return parse_switch("SEMULA_EMBEDDINGS", os.environ.get("SEMULA_EMBEDDINGS"))
    except ValueError:
        return False  # `semula proxy` refuses a misspelt switch before mitmproxy starts


def declare(loader: Any) -> None:
    loader.add_option("semula_mode", str, Mode.AUTO.value, "semula mode", choices=[m.value for m in Mode])
    loader.add_option(
        "semula_data_dir", str, os.environ.get("SEMULA_DATA_DIR", ".semula"),
        "semula data dir: DuckDB store, Parquet call log, admin.json",
    )
    loader.add_option("semula_project", str, DEFAULT_PROJECT, "semula default project (namespace)")
    loader.add_option(
        "semula_hosts", Sequence[str], list(DEFAULT_PROVIDER_HOSTS),
        "provider hosts semula intercepts (exact names or *.suffix); replaces the defaults",
    )
    loader.add_option("semula_extra_hosts", Sequence[str], [],
                      "more hosts to intercept, added to semula_hosts (an OpenAI-compatible API, a CDN a test needs)")
    loader.add_option("semula_intercept_all", bool, False,
                      "decrypt every HTTPS host, not only the intercepted ones: the others are forwarded untouched, "
                      "streamed and never recorded, their certificates checked against the public roots; `semula "
                      "exec` and the pytest plugin then give clients a bundle of semula's CA alone (docs/performance.md)")
    loader.add_option("semula_mcp_servers", Sequence[str], [],
                      "MCP servers (Streamable HTTP) to record and replay: host, host:port or host:port/path; "
                      "their JSON-RPC calls are matched by method and params, never by id or session")
    loader.add_option("semula_side_paths", Sequence[str], [],
                      "regexes searched in the path of side calls (telemetry): never recorded, answered locally in replay")
    loader.add_option("semula_record_errors", bool, False, "record every answer (default: 2xx and 400/404/422, not 401/403/408/429/5xx)")
    loader.add_option("semula_namespace_by_key", bool, False, "add a hash of the API key to the project namespace")
    loader.add_option("semula_admin", bool, True, "serve the admin endpoint used by the semula CLI")
    loader.add_option(
        "semula_recordings", str, os.environ.get("SEMULA_RECORDINGS", DEFAULT_RECORDINGS),
        "recordings folder to commit (one JSON file per recording); 'off' turns it off",
    )
    # Numbers are declared as text: mitmproxy's `--set` parser has no float type (it raises
    # NotImplementedError); `read` parses them and names a bad one.
    loader.add_option("semula_load_timeout", str, "60",
                      "seconds a request that arrives while the store loads waits before the clear error")
    loader.add_option("semula_max_body_mb", str, "32",
                      "request bodies inflating beyond this many MB are not matched (auto: forwarded untouched)")
    loader.add_option("semula_repeats", str, "one",
                      "identical requests in one run: 'one' answer for all, or a 'sequence' of answers in order",
                      choices=list(REPEATS))
    loader.add_option("semula_repeats_exhausted", str, "last",
                      "sequence replay after the last answer: serve the 'last' again, or 'refuse' (a miss)",
                      choices=list(REPEATS_EXHAUSTED))
    loader.add_option("semula_read_only", bool, False,
                      "never write the data dir (a read-only cache): open the store read-only, log to a temp dir; "
                      "also on when the data dir or its store is not writable")
    loader.add_option("semula_console_calls", bool, True,
                      "print one console line per intercepted call (off: the call log still has every call)")
    # Not defaulted from SEMULA_STORE: an option's value shows in mitmweb's options page, a URL may hold a password.
    loader.add_option("semula_store", str, "",
                      "a shared Postgres store (postgresql://…); empty: $SEMULA_STORE, else the DuckDB file in the data dir")
    loader.add_option("semula_embeddings", bool, _embeddings_default(),
                      "opt-in embedding tier (fastembed); also SEMULA_EMBEDDINGS=on")
    loader.add_option("semula_ignore", str, "",
                      "fields the project declares volatile, left out of both fingerprints: at start-up, sets the "
                      "`ignore` setting of semula_project (as `semula config set ignore` does; kept in its "
                      '_settings.json): JSON {"paths": ["run_tag.id"], "patterns": ["seed=\\\\d+"]}; '
                      "empty: leave the setting as it is")
    loader.add_option("semula_realtime_max_message_mb", str, "16",
                      "a Realtime WebSocket message over this many MB closes its connection (1009, message too big) "
                      "as its first frame header arrives; OpenAI caps a client event at 15 MiB")
    loader.add_option("semula_realtime_max_session_mb", str, "64",
                      "a Realtime conversation over this many MB of messages is relayed but not recorded "
                      "(one log line); never above the loader's cap of a recording file (SEMULA_RECORDING_MAX_MB)")
    loader.add_option("semula_otel", str, "off",
                      "OpenTelemetry spans, one per call, sent over OTLP/HTTP: 'on' sends them to "
                      "OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, or give the collector's URL; needs the otel extra")
    loader.add_option("semula_otel_content", bool, False,
                      "with semula_otel: put the prompt and answer text (redacted) in the spans")


@dataclass(frozen=True)
class DeclaredOption:
    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


class _Collector:
    """A stand-in for mitmproxy's loader that keeps what `declare` adds (for `semula proxy --help`)."""

    def __init__(self) -> None:
        self.options: list[DeclaredOption] = []

    def add_option(self, name: str, typespec: Any, default: Any, help: str, choices: Sequence[str] | None = None) -> None:
        self.options.append(DeclaredOption(name, default, help, tuple(choices) if choices else None))


def declared() -> list[DeclaredOption]:
    """Every semula_* option as `declare` adds it: one source for mitmproxy and the CLI's help."""
    collector = _Collector()
    declare(collector)
    return collector.options


# mitmproxy's own options that `read` copies into the settings (so nothing reads `ctx.options` after `configure`).
MITMPROXY_OPTIONS = frozenset({"confdir", "listen_host", "listen_port"})

# The options a proxy reads once, when it starts (mitmproxy's `HASH_OPTIONS` habit: the options that change
# what was built), by the setting each gives: the store, the recordings folder, the embedding model, the data
# dir and the admin endpoint are opened then. A running proxy refuses a change (`refuse_restart_changes`);
# every other option is applied at once, since the code reads it from the settings on each call.
RESTART_OPTIONS: dict[str, str] = {
    "semula_data_dir": "data_dir",
    "semula_store": "store",
    "semula_recordings": "recordings",
    "semula_embeddings": "embeddings",
    "semula_otel": "otel",
    "semula_otel_content": "otel_content",  # the span thread is made with it
    "semula_read_only": "read_only",
    "semula_admin": "admin",
    "semula_ignore": "ignore",  # applied to the project's setting once the engine opens
}


def refuse_restart_changes(started: AddonSettings, now: AddonSettings) -> None:
    """OptionsError naming the restart options whose setting differs from what the proxy started with
    (mitmproxy then rolls the change back: the option keeps its value)."""
    changed = [name for name, setting in RESTART_OPTIONS.items() if getattr(started, setting) != getattr(now, setting)]
    if changed:
        raise exceptions.OptionsError(
            f"semula: {', '.join(changed)} cannot change on a running proxy (read once, at start-up): "
            "restart the proxy with the new value")


def read(options: Any) -> tuple[Mode, AddonSettings]:
    """Validate the semula_* options (and `MITMPROXY_OPTIONS`) into the mode and the frozen settings."""
    try:
        mode = Mode.parse(options.semula_mode)
        validate_project(options.semula_project)
        ignore = parse_setting("ignore", options.semula_ignore) if options.semula_ignore.strip() else None
    except (ValueError, SettingsError) as e:
        raise exceptions.OptionsError(f"semula: {e}") from None
    data_dir = str(Path(options.semula_data_dir).expanduser().resolve())
    folder = options.semula_recordings.strip()
    location = recordings_location(folder)
    recordings = str(location.resolve()) if location is not None else None
    store = server_url(options.semula_store or None)
    mcp_servers = mcp_server_list(options.semula_mcp_servers)
    if store and folder == DEFAULT_RECORDINGS and not os.environ.get("SEMULA_RECORDINGS"):
        recordings = None  # a server store is the shared copy: the folder only when asked for (--recordings)
    return mode, AddonSettings(
        mode=mode.value, data_dir=data_dir, default_project=options.semula_project,
        hosts=host_list(options.semula_hosts, [*options.semula_extra_hosts, *mcp_hosts(mcp_servers)]),
        mcp_servers=mcp_servers,
        side_paths=side_path_list(options.semula_side_paths), record_errors=options.semula_record_errors,
        namespace_by_key=options.semula_namespace_by_key, admin=options.semula_admin, recordings=recordings,
        load_timeout=positive_number("semula_load_timeout", options.semula_load_timeout),
        max_body_mb=positive_number("semula_max_body_mb", options.semula_max_body_mb),
        repeats=options.semula_repeats, repeats_exhausted=options.semula_repeats_exhausted,
        read_only=options.semula_read_only, console_calls=options.semula_console_calls,
        store=store, embeddings=options.semula_embeddings,
        realtime_max_message_mb=positive_number("semula_realtime_max_message_mb", options.semula_realtime_max_message_mb),
        realtime_max_session_mb=positive_number("semula_realtime_max_session_mb", options.semula_realtime_max_session_mb),
        otel=otel_setting(options.semula_otel), otel_content=options.semula_otel_content,
        confdir=options.confdir, listen_host=options.listen_host, listen_port=options.listen_port,
        ignore=ignore,
    )


def positive_number(name: str, value: object) -> float:
    """A number option's value (text from `--set`, or a number set in code), over zero."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0 or number == float("inf"):
        raise exceptions.OptionsError(f"semula: {name}={value!r} is not a number over 0")
    return number


def otel_setting(value: str) -> str:
    """semula_otel checked: off, on (which needs the OTLP endpoint's variable) or an http(s) URL."""
    setting = value.strip() or "off"
    if setting == "off":
        return setting
    from semula.calllog.spans import otel_problem  # only when asked for: start-up imports are measured

    if problem := otel_problem(setting, os.environ):
        raise exceptions.OptionsError(f"semula: semula_otel: {problem}")  # the value may be a URL with a password
    return setting


def split_items(values: Sequence[str]) -> list[str]:
    """Option values, each also split at commas (`--set semula_extra_hosts=a.com,b.com`)."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def host_list(hosts: Sequence[str], extra: Sequence[str]) -> tuple[str, ...]:
    """The hosts to intercept: semula_hosts (the defaults unless set) and then the extra ones."""
    return tuple(dict.fromkeys(h.lower() for h in split_items([*hosts, *extra])))


def mcp_server_list(entries: Sequence[str]) -> tuple[str, ...]:
    """The MCP servers named (semula_mcp_servers), each checked: a bad one is an OptionsError naming it."""
    from semula.providers.mcp import parse_servers

    servers = tuple(dict.fromkeys(split_items(entries)))
    try:
        parse_servers(servers)
    except ValueError as e:
        raise exceptions.OptionsError(f"semula: {e}") from None
    return servers


def mcp_hosts(servers: tuple[str, ...]) -> list[str]:
    from semula.providers.mcp import server_hosts

    return list(server_hosts(servers))


def side_path_list(patterns: Sequence[str]) -> tuple[str, ...]:
    from semula.providers.sidepaths import compile_side_paths

    try:
        compile_side_paths(patterns)
    except ValueError as e:
        raise exceptions.OptionsError(f"semula: {e}") from None
    return tuple(patterns)
