"""The mitmproxy addon: the thin edge between mitmproxy's hooks and semula's pure core.

Hooks run in mitmproxy's asyncio loop. Matching on the hit path is a dictionary lookup;
everything that touches DuckDB runs on one store thread (`run_in_executor`), and the call
log is written by a background thread. Whatever goes wrong with the store, the addon
fails open: it logs why and treats the call as a miss (auto/record: upstream; replay: the
clear error) — never a 5xx of its own making, never a dead proxy.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gc
import hashlib
import logging
import os
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy import command, ctx, exceptions, http
from mitmproxy.net.encoding import decode

from semula.proxy.admin import AdminServer, read_admin_info
from semula.core.bypass import NO_CACHE_HEADER, fuzzy_bypass, no_cache_header
from semula.engine.cache import Cache
from semula.core.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.decision import Bypass, Decision, decide
from semula.core.explain import miss_message
from semula.store.logschema import CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION
from semula.core.modes import Mode
from semula.core.normalise import scrub_volatile
from semula.engine.operations import run_operation
from semula.store.parquetlog import ParquetLog
from semula.engine.review import NearSearch
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, host_matches
from semula.providers.base import Adapter, AdapterError, RawRequest, Usage
from semula.core.redact import clean_headers, clean_query, redact_bytes, redact_text
from semula.core.settings import DEFAULT_PROJECT, AddonSettings, ProjectSettings, SettingsError, validate_project
from semula.providers.sse import split_frames
from semula.store.duckdb_store import Store
from semula.store.types import NewEntry, StoreError

log = logging.getLogger("semula")

PROJECT_HEADER = "x-semula-project"
REPLAY_REFUSAL_STATUS = 404  # a 4xx that SDKs do not retry (not 408/409/429)
STORE_RETRY_SECONDS = 5.0
BIG_BODY_BYTES = 256 * 1024  # larger request bodies are parsed and fingerprinted off the event loop
# An identical request waits this long for a recording in flight instead of going upstream again.
PENDING_WAIT_SECONDS = 120.0
KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")


@dataclass
class FlowState:
    """What the addon knows about one intercepted provider call, between hooks."""

    host: str
    project: str
    no_cache: bool
    adapter: Adapter | None = None
    canonical: CanonicalRequest | None = None
    settings: ProjectSettings = field(default_factory=ProjectSettings)
    request_fp: str | None = None
    normalised_fp: str | None = None
    decision: Decision | None = None
    decision_ms: float | None = None
    upstream_started: float | None = None
    streamed: bool = False
    chunks: list[bytes] = field(default_factory=list)
    recorded_upstream_ms: float | None = None
    recorded_usage: Usage = field(default_factory=Usage)
    error: str | None = None
    path: str = ""
    pending_key: tuple[str, str] | None = None
    near: NearSearch | None = None
    fuzzy_reason: str | None = None
    started_at: Any = None


def decode_partial(raw: bytes, encoding: str) -> bytes:
    """Decode a captured body; a compressed stream cut short yields what arrived (a client may hang up
    at the terminal event, before the compressor's trailer)."""
    try:
        return decode(raw, encoding) or b""
    except ValueError:
        pass
    if encoding.strip().lower() in ("gzip", "x-gzip", "deflate"):
        wbits = 31 if "gzip" in encoding.lower() else 15
        try:
            return zlib.decompressobj(wbits=wbits).decompress(raw)
        except zlib.error:
            pass
    return raw


def proxy_user(header_value: str | None) -> str | None:
    """The user name of a Basic Proxy-Authorization header (no password needed)."""
    if not header_value or not header_value.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header_value[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user = decoded.split(":", 1)[0]
    return user or None


def api_key_hash(raw: RawRequest) -> str | None:
    for name in KEY_HEADERS:
        if value := raw.headers.get(name):
            return hashlib.sha256(value.removeprefix("Bearer ").encode()).hexdigest()[:12]
    for name, value in raw.query:
        if name == "key":
            return hashlib.sha256(value.encode()).hexdigest()[:12]
    return None


class SemulaAddon:
    def __init__(self) -> None:
        self.settings = AddonSettings(hosts=DEFAULT_PROVIDER_HOSTS)
        self.mode = Mode.AUTO
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semula-store")
        self.cache: Cache | None = None
        self.store_problem: str | None = "the store is not open yet"
        self._next_store_attempt = 0.0
        self.calls: ParquetLog | None = None
        self.reviews: ParquetLog | None = None
        self.embedder: Any = None
        self.admin: AdminServer | None = None
        self.conn_projects: dict[str, str] = {}
        self.flows: dict[str, FlowState] = {}
        # Recordings in flight, by (project, normalised or exact fp): a streamed answer reaches
        # the client before it is stored, so a repeat sent at once must wait for it.
        self.pending: dict[tuple[str, str], asyncio.Event] = {}
        self.is_running = False

    # --- options ---------------------------------------------------------------------------

    def load(self, loader: Any) -> None:
        loader.add_option("semula_mode", str, "auto", "semula mode: auto | replay | record | passthrough")
        loader.add_option(
            "semula_data_dir", str, os.environ.get("SEMULA_DATA_DIR", ".semula"),
            "semula data dir: DuckDB store, Parquet call log, admin.json",
        )
        loader.add_option("semula_project", str, DEFAULT_PROJECT, "semula default project (namespace)")
        loader.add_option(
            "semula_hosts", Sequence[str], list(DEFAULT_PROVIDER_HOSTS),
            "provider hosts semula intercepts (exact names or *.suffix)",
        )
        loader.add_option("semula_record_errors", bool, False, "also record 4xx/5xx answers (default: only complete 2xx)")
        loader.add_option("semula_namespace_by_key", bool, False, "add a hash of the API key to the project namespace")
        loader.add_option("semula_admin", bool, True, "serve the admin endpoint used by the semula CLI")
        loader.add_option(
            "semula_embeddings", bool, os.environ.get("SEMULA_EMBEDDINGS", "off").lower() in ("1", "on", "true", "yes"),
            "opt-in embedding tier (fastembed); also SEMULA_EMBEDDINGS=on",
        )

    def configure(self, updated: set[str]) -> None:
        if not any(name.startswith("semula_") for name in updated):
            return
        options = ctx.options
        try:
            mode = Mode.parse(options.semula_mode)
            validate_project(options.semula_project)
        except (ValueError, SettingsError) as e:
            raise exceptions.OptionsError(f"semula: {e}") from None
        data_dir = str(Path(options.semula_data_dir).expanduser().resolve())
        old_dir = self.settings.data_dir
        self.mode = mode
        self.settings = AddonSettings(
            mode=mode.value, data_dir=data_dir, default_project=options.semula_project,
            hosts=tuple(options.semula_hosts), record_errors=options.semula_record_errors,
            namespace_by_key=options.semula_namespace_by_key, admin=options.semula_admin,
        )
        if self.is_running and data_dir != old_dir:
            log.warning("semula: data dir changed to %s; restart the proxy to move the store and logs", data_dir)

    # --- life cycle ------------------------------------------------------------------------

    async def running(self) -> None:
        data_dir = Path(self.settings.data_dir)
        if ctx.options.semula_embeddings and not await self._load_embedder(data_dir):
            return
        self.calls = ParquetLog(data_dir / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION)
        self.reviews = ParquetLog(data_dir / "reviews", REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION)
        await self._ensure_store(force=True)
        listen = self._listen_address()
        confdir = Path(os.path.expanduser(ctx.options.confdir))
        other = read_admin_info(data_dir)
        if other is not None and other.get("pid") != os.getpid():
            print(f"semula: another semula proxy (pid {other.get('pid')}, {other.get('proxy')}) holds {data_dir}: "
                  "this one cannot use its store and forwards calls unrecorded (replay: refuses them). "
                  "Stop the other proxy, point clients at it, or use another --data-dir.", flush=True)
        elif self.settings.admin:
            try:
                self.admin = AdminServer(data_dir, self._admin_dispatch, {
                    "proxy": listen, "mode": self.mode.value, "data_dir": str(data_dir),
                    "project": self.settings.default_project, "confdir": str(confdir),
                })
            except OSError as e:
                log.warning("semula: admin endpoint not started (%s); CLI commands cannot reach this proxy", e)
        self.is_running = True
        store_note = "" if self.cache else f" · store unavailable: {self.store_problem}"
        print(
            f"semula ready: {listen} · mode {self.mode.value} · data dir {data_dir} · "
            f"CA {confdir / 'mitmproxy-ca-cert.pem'}{store_note}",
            flush=True,
        )

    async def _load_embedder(self, data_dir: Path) -> bool:
        """With the tier switched on, a missing extra or model refuses to start: never silently without it."""
        from semula.embeddings.model import Embedder, EmbeddingsUnavailable, config_from_env

        try:
            config = config_from_env(data_dir, option_enabled=True)
            self.embedder = await asyncio.get_running_loop().run_in_executor(None, Embedder.load, config)
        except (EmbeddingsUnavailable, ValueError) as e:
            print(f"semula: cannot start: the embedding tier is on (SEMULA_EMBEDDINGS / semula_embeddings) "
                  f"but {e}", flush=True)
            log.error("semula: refusing to start without the embedding tier: %s", e)
            ctx.master.shutdown()
            return False
        log.info("semula: embedding tier on with model %s", self.embedder.name)
        return True

    def _listen_address(self) -> str:
        try:
            addrs = ctx.master.addons.get("proxyserver").listen_addrs()
            host, port = addrs[0][0], addrs[0][1]
        except Exception:
            host, port = ctx.options.listen_host or "127.0.0.1", ctx.options.listen_port or 8080
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{host}:{port}"

    def done(self) -> None:
        if self.admin:
            self.admin.close()
            self.admin = None
        for log_writer in (self.calls, self.reviews):
            if log_writer:
                log_writer.close()
        self.calls = self.reviews = None
        cache, self.cache = self.cache, None
        if cache:
            self.executor.submit(cache.close).result(timeout=60)
        self.executor.shutdown(wait=True)

    async def _ensure_store(self, force: bool = False) -> None:
        """Open the store if it is not open; after a failure, retry at most every few seconds."""
        if self.cache is not None or (not force and time.monotonic() < self._next_store_attempt):
            return
        self._next_store_attempt = time.monotonic() + STORE_RETRY_SECONDS
        loop = asyncio.get_running_loop()
        try:
            self.cache = await loop.run_in_executor(self.executor, self._open_cache)
            self.store_problem = None
        except Exception as e:
            if self.store_problem != str(e):
                log.warning(
                    "semula: store unavailable: %s — calls are forwarded unrecorded in auto/record mode "
                    "and refused in replay mode; retrying every %.0f s", e, STORE_RETRY_SECONDS,
                )
            self.store_problem = str(e)

    def _open_cache(self) -> Cache:
        cache = Cache(Store.open(self.settings.data_dir), review_log=self._log_review, embedder=self.embedder)
        gc.freeze()  # the preloaded answers are long-lived: keep them out of every collection
        return cache

    def _log_review(self, row: dict[str, Any]) -> None:
        if self.reviews is not None:
            self.reviews.append(row)

    def _store_failed(self, e: Exception) -> None:
        """A store call failed mid-flight: drop the handle so the next call reopens it."""
        self.store_problem = str(e)
        log.warning("semula: store error: %s (failing open)", e)
        cache, self.cache = self.cache, None
        if cache:
            self.executor.submit(cache.close)

    def _admin_dispatch(self, method: str, params: dict[str, Any]) -> Any:
        def run() -> Any:
            if self.cache is None:
                try:
                    self.cache = self._open_cache()
                    self.store_problem = None
                except Exception as e:
                    raise StoreError(f"the proxy cannot open its store: {e}") from e
            return run_operation(self.cache, method, params)

        return self.executor.submit(run).result(timeout=600)

    # --- hooks -----------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # Only the CONNECT carries Proxy-Authorization; its user name names the project of
        # every flow on this client connection. mitmproxy's proxyauth stays off (it would 407).
        if user := proxy_user(flow.request.headers.get("proxy-authorization")):
            self.conn_projects[flow.client_conn.id] = user

    def client_disconnected(self, client: Any) -> None:
        self.conn_projects.pop(client.id, None)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # The host the client asked for, noted before map_remote rewrites the URL.
        host = flow.request.pretty_host.lower()
        if not host_matches(host, self.settings.hosts):
            return
        headers = flow.request.headers
        user = proxy_user(headers.get("proxy-authorization"))  # plain-HTTP proxying sends it per request
        header_project = headers.get(PROJECT_HEADER)
        no_cache = NO_CACHE_HEADER in headers
        for name in ("proxy-authorization", PROJECT_HEADER, NO_CACHE_HEADER):
            if name in headers:
                del headers[name]
        project = self.conn_projects.get(flow.client_conn.id) or user or header_project or self.settings.default_project
        self.flows[flow.id] = FlowState(host=host, project=project, no_cache=no_cache, path=flow.request.path.split("?", 1)[0])

    async def request(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is not None:
            return
        started = time.perf_counter()
        state.started_at = datetime.now(UTC).replace(tzinfo=None)
        try:
            decision = await self._decide(flow, state)
        except Exception as e:  # a bug of ours must not take the call down with it
            log.exception("semula: internal error while deciding; forwarding the call")
            state.error = f"internal error: {e}"
            decision = Decision("error", "refuse" if self.mode is Mode.REPLAY else "forward", reason=state.error)
        state.decision = decision
        if decision.action == "serve":
            served = await self._serve(flow, state, decision)
            if not served:
                decision = state.decision = decide(self.mode, None, None, self.store_problem if self.cache is None else None)
        if state.decision.action == "refuse":
            await self._refuse(flow, state)
        state.decision_ms = (time.perf_counter() - started) * 1000
        if state.decision.action == "forward":
            state.upstream_started = time.perf_counter()
            if state.decision.record and self.mode is Mode.AUTO and (key := self._pending_key(state)):
                self.pending.setdefault(key, asyncio.Event())
                state.pending_key = key
        else:
            self._finish(flow, state)

    async def _decide(self, flow: http.HTTPFlow, state: FlowState) -> Decision:
        request = flow.request
        raw = RawRequest(
            method=request.method.upper(),
            host=state.host,
            path=state.path,
            query=tuple((k, v) for k, v in request.query.fields),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=request.get_content(strict=False) or b"",
        )
        adapter = state.adapter = adapter_for(raw.host, raw.path)
        bypass: Bypass | None = no_cache_header({NO_CACHE_HEADER: "1"}) if state.no_cache else None
        try:
            validate_project(state.project)
        except SettingsError as e:
            bypass = bypass or Bypass("invalid_project", str(e))
        if self.settings.namespace_by_key and (key_hash := api_key_hash(raw)):
            state.project = f"{state.project}.k{key_hash}"
        big = len(raw.body) > BIG_BODY_BYTES
        loop = asyncio.get_running_loop()
        if bypass is None and self.mode is not Mode.PASSTHROUGH:
            try:
                if big:  # parsing a multi-megabyte prompt must not stall the other flows
                    state.canonical = await loop.run_in_executor(None, self._canonicalise, adapter, raw)
                else:
                    state.canonical = self._canonicalise(adapter, raw)
            except AdapterError as e:
                bypass = Bypass("unparsable_body", f"cannot match this request: {e}")
        if self.mode is Mode.PASSTHROUGH:
            return decide(self.mode, None)
        await self._ensure_store()
        cache = self.cache
        match = None
        if state.canonical is not None:
            state.settings = cache.settings_for(state.project) if cache else ProjectSettings()
            state.request_fp = request_fingerprint(state.canonical)
            if cache is not None and bypass is None:
                match = cache.match(state.project, state.request_fp, None)  # exact first: the cheap path
            if match is None and state.canonical.parsed:
                inputs = (state.canonical, *state.settings.fingerprint_inputs)
                state.normalised_fp = (await loop.run_in_executor(None, normalised_fingerprint, *inputs) if big
                                       else normalised_fingerprint(*inputs))
            if cache is not None and bypass is None and match is None:
                match = cache.match(state.project, state.request_fp, state.normalised_fp)
                if match is None and self.mode is Mode.AUTO and (key := self._pending_key(state)) in self.pending:
                    try:
                        await asyncio.wait_for(self.pending[key].wait(), PENDING_WAIT_SECONDS)
                    except TimeoutError:
                        pass
                    match = cache.match(state.project, state.request_fp, state.normalised_fp)
                if match is None and self.mode in (Mode.AUTO, Mode.REPLAY) and state.normalised_fp:
                    match = await self._near(cache, state)
        return decide(self.mode, match, bypass, None if cache is not None else self.store_problem)

    async def _near(self, cache: Cache, state: FlowState):
        """The near-match tiers (lexical), on the store thread; never served past a fuzzy bypass."""
        assert state.canonical is not None and state.request_fp and state.normalised_fp
        fuzzy = fuzzy_bypass(state.canonical, state.settings)
        state.fuzzy_reason = fuzzy.reason if fuzzy else None
        try:
            state.near = await asyncio.get_running_loop().run_in_executor(
                self.executor, cache.near, state.project, state.canonical, state.request_fp,
                state.normalised_fp, state.settings, state.fuzzy_reason)
        except Exception as e:
            log.warning("semula: near-match search failed (%s); treating the call as a miss", e)
            return None
        return state.near.served

    @staticmethod
    def _quietly(fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:
            log.warning("semula: background store work failed: %s", e)

    @staticmethod
    def _pending_key(state: FlowState) -> tuple[str, str] | None:
        fp = state.normalised_fp or state.request_fp
        return (state.project, fp) if fp else None

    @staticmethod
    def _canonicalise(adapter: Adapter, raw: RawRequest) -> CanonicalRequest:
        if not raw.body and raw.method in ("GET", "HEAD", "DELETE"):
            # e.g. GET /v1/models: replayable by the exact tier, nothing to normalise
            return CanonicalRequest(
                provider=adapter.name, method=raw.method, endpoint=raw.path,
                query=tuple(sorted(clean_query(raw.query))),
                headers=(), model=None, system=None, messages=(), tools=(), params={},
                stream=False, body=None, parsed=False,
            )
        return adapter.canonicalise(raw)

    async def _serve(self, flow: http.HTTPFlow, state: FlowState, decision: Decision) -> bool:
        cache = self.cache
        assert cache is not None and decision.entry_id is not None
        entry = cache.cached_entry(decision.entry_id)
        if entry is None:
            try:
                entry = await asyncio.get_running_loop().run_in_executor(self.executor, cache.entry, decision.entry_id)
            except Exception as e:
                self._store_failed(e)
                return False
        if entry is None:
            return False
        state.normalised_fp = state.normalised_fp or entry.normalised_fp
        if (state.project, state.normalised_fp) in cache.open_requests:  # an answered request closes its own
            self.executor.submit(self._quietly, cache.review.answered, state.project, state.normalised_fp)
        state.recorded_upstream_ms = entry.upstream_ms
        state.recorded_usage = Usage(entry.prompt_tokens, entry.completion_tokens)
        state.streamed = entry.streamed
        headers = [(k.encode(), v.encode()) for k, v in entry.headers]
        headers += [(k.encode(), v.encode()) for k, v in self._semula_headers(decision).items()]
        flow.response = http.Response.make(entry.status, entry.body, http.Headers(headers))
        flow.marked = ":green_circle:"
        return True

    async def _refuse(self, flow: http.HTTPFlow, state: FlowState) -> None:
        decision = state.decision
        assert decision is not None
        problem = None
        if decision.decision == "bypass":
            problem = f"{decision.bypass_reason}, and replay mode never reaches the network"
        elif decision.decision == "error":
            problem = decision.reason
        nearest, others = [], []
        cache = self.cache
        if cache is not None and state.canonical is not None and decision.decision == "miss":
            try:
                nearest = await asyncio.get_running_loop().run_in_executor(
                    self.executor, cache.nearest, state.project, state.canonical)
            except Exception as e:
                log.warning("semula: could not rank the nearest recordings: %s", e)
            if state.request_fp:
                others = sorted(cache.projects_with(state.request_fp) - {state.project})
        candidate = state.near.best if state.near and state.near.best else None
        message = redact_text(miss_message(state.project, self.mode.value, nearest, others, problem, candidate))
        adapter = state.adapter or adapter_for(state.host, state.path)
        body = adapter.error_body(REPLAY_REFUSAL_STATUS, message)
        headers = {"content-type": "application/json", **self._semula_headers(decision)}
        flow.response = http.Response.make(REPLAY_REFUSAL_STATUS, body, headers)
        flow.marked = ":red_circle:"
        state.error = message

    @staticmethod
    def _semula_headers(decision: Decision, entry_id: int | None = None) -> dict[str, str]:
        entry = decision.entry_id if decision.entry_id is not None else entry_id
        return {
            "x-semula-decision": decision.decision,
            "x-semula-tier": decision.tier,
            "x-semula-score": "" if decision.score is None else f"{decision.score:.3f}",
            "x-semula-entry": "" if entry is None else str(entry),
        }

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or flow.response is None:
            return
        # Headers set in `response` no longer reach a streamed client: set them here.
        flow.response.headers.update(self._semula_headers(state.decision))
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            state.streamed = True
            chunks = state.chunks

            def capture(chunk: bytes) -> bytes:
                if chunk:
                    chunks.append(chunk)
                return chunk

            flow.response.stream = capture

    async def response(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or state.decision.action != "forward" or flow.response is None:
            return
        await self._complete(flow, state)

    async def _complete(self, flow: http.HTTPFlow, state: FlowState, client_gone: str | None = None) -> None:
        """Record (if wanted) and log a forwarded call whose answer arrived.

        `client_gone` is set when the client hung up before the body ended: only a stream whose
        captured frames already end with the provider's terminal event is then complete.
        """
        self.flows.pop(flow.id, None)
        response = flow.response
        assert response is not None and state.decision is not None
        upstream_ms = (time.perf_counter() - state.upstream_started) * 1000 if state.upstream_started else None
        if state.streamed:
            body = decode_partial(b"".join(state.chunks), response.headers.get("content-encoding", "identity"))
        else:
            body = response.get_content(strict=False) or b""
        adapter = state.adapter or adapter_for(state.host, state.path)
        frames = split_frames(body) if state.streamed else []
        usage = adapter.usage_from_frames(frames) if state.streamed else adapter.usage_from_body(body)
        entry_id = None
        recorded = False
        if client_gone and not (state.streamed and adapter.stream_complete(frames)):
            state.error = client_gone
        elif state.decision.record and state.canonical is not None:
            why_not = self._unrecordable(adapter, response.status_code, state.streamed, frames)
            if why_not:
                state.error = why_not
            else:
                entry_id = await self._record(state, response, body, usage, upstream_ms)
                recorded = entry_id is not None
        self._finish(flow, state, upstream_ms=upstream_ms, usage=usage, entry_id=entry_id, recorded=recorded)

    def _unrecordable(self, adapter: Adapter, status: int, streamed: bool, frames: list[bytes]) -> str | None:
        if not (200 <= status < 300) and not self.settings.record_errors:
            return f"not recorded: upstream answered {status} (only complete 2xx answers are recorded)"
        if streamed and not adapter.stream_complete(frames):
            return "not recorded: the stream ended without its terminal event"
        return None

    async def _record(self, state: FlowState, response: http.Response, body: bytes, usage: Usage,
                      upstream_ms: float | None) -> int | None:
        canonical = state.canonical
        assert canonical is not None and state.request_fp is not None
        cache = self.cache
        if cache is None:
            state.error = f"not recorded: store unavailable ({self.store_problem})"
            return None
        normalised_fp = state.normalised_fp  # not computed when the exact tier answered the lookup (record mode)
        if normalised_fp is None:
            normalised_fp = (normalised_fingerprint(canonical, *state.settings.fingerprint_inputs)
                             if canonical.parsed else state.request_fp)
        new = NewEntry(
            project=state.project, provider=canonical.provider, host=state.host, method=canonical.method,
            endpoint=canonical.endpoint, model=canonical.model, request_fp=state.request_fp,
            normalised_fp=normalised_fp, canonical=canonical.to_json(),
            last_text=redact_text(scrub_volatile(canonical.last_text(), state.settings.scrub_patterns)),
            status=response.status_code, headers=clean_headers(response.headers.items()),
            body=redact_bytes(body), streamed=state.streamed, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens, upstream_ms=upstream_ms,
        )
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, cache.record, new, state.started_at)
        except Exception as e:
            self._store_failed(e)
            state.error = f"not recorded: {e}"
            return None

    async def error(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None:
            return
        message = redact_text(str(flow.error)) if flow.error else "connection error"
        if state.streamed and flow.response is not None and state.decision.action == "forward":
            # The sync openai SDK closes the response at `data: [DONE]`, before the body's last
            # chunk: a stream that delivered its terminal event is still a complete answer.
            await self._complete(flow, state, client_gone=message)
            return
        self.flows.pop(flow.id, None)
        state.error = message
        upstream_ms = (time.perf_counter() - state.upstream_started) * 1000 if state.upstream_started else None
        self._finish(flow, state, upstream_ms=upstream_ms)

    # --- the call log ----------------------------------------------------------------------

    def _finish(self, flow: http.HTTPFlow, state: FlowState, upstream_ms: float | None = None,
                usage: Usage | None = None, entry_id: int | None = None, recorded: bool = False) -> None:
        self.flows.pop(flow.id, None)
        if state.pending_key is not None and (event := self.pending.pop(state.pending_key, None)):
            event.set()
        decision = state.decision
        assert decision is not None
        entry = decision.entry_id if decision.entry_id is not None else entry_id
        status = flow.response.status_code if flow.response is not None else None
        canonical = state.canonical
        row = {
            "project": state.project, "provider": canonical.provider if canonical else (state.adapter.name if state.adapter else None),
            "host": state.host, "method": flow.request.method, "path": state.path,
            "model": canonical.model if canonical else None, "mode": self.mode.value,
            "decision": decision.decision, "tier": decision.tier, "score": decision.score, "entry_id": entry,
            "bypass_reason": decision.bypass_reason, "streamed": state.streamed, "status": status,
            "decision_ms": state.decision_ms, "upstream_ms": upstream_ms,
            "recorded_upstream_ms": state.recorded_upstream_ms if decision.action == "serve" else None,
            "recorded_prompt_tokens": state.recorded_usage.prompt_tokens if decision.action == "serve" else None,
            "recorded_completion_tokens": state.recorded_usage.completion_tokens if decision.action == "serve" else None,
            "request_fp": state.request_fp, "normalised_fp": state.normalised_fp,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "recorded": recorded, "error": state.error,
        }
        if state.near is not None and state.near.best is not None:
            best = state.near.best
            row.update(candidate_tier=best.verdict.tier, candidate_score=best.verdict.score,
                       candidate_entry_id=best.entry_id, guard_reason=best.verdict.guard_reason)
        if not row["bypass_reason"]:
            row["bypass_reason"] = state.fuzzy_reason
        if self.calls is not None:
            self.calls.append(row)
        flow.comment = self._comment(decision, entry, state)
        took = f"{state.decision_ms:.1f} ms" if state.decision_ms is not None else "-"
        entry_text = f" #{entry}" if entry is not None else ""
        tier = f" {decision.tier}" if decision.tier != "none" else ""
        extra = f" ({decision.bypass_reason})" if decision.bypass_reason else ""
        if recorded:
            extra += " · recorded"
        elif state.error and decision.action != "refuse":
            extra += f" · {state.error}"
        print(
            f"semula: {state.project} {row['provider']} {flow.request.method} {state.host}{state.path} → "
            f"{decision.decision}{tier}{entry_text}{extra} · {status if status is not None else 'no response'} · {took}",
            flush=True,
        )

    @staticmethod
    def _comment(decision: Decision, entry: int | None, state: FlowState) -> str:
        parts = [f"semula {decision.decision}", f"tier {decision.tier}"]
        if decision.score is not None:
            parts.append(f"score {decision.score:.3f}")
        if entry is not None:
            parts.append(f"entry #{entry}")
        parts.append(f"project {state.project}")
        if decision.bypass_reason:
            parts.append(f"bypass: {decision.bypass_reason}")
        if state.error:
            parts.append(state.error[:300])
        return " · ".join(parts)

    # --- commands (mitmweb / console) ------------------------------------------------------

    def _command(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return self._admin_dispatch(method, params)
        except Exception as e:
            raise exceptions.CommandError(f"semula: {e}") from None

    @command.command("semula.review.list")
    def review_list(self) -> str:
        """Open review candidates: id, project, tier, score, guard reason, both texts."""
        rows = self._command("review.list", {})
        if not rows:
            return "semula: no open review candidates"
        return "\n".join(
            f"#{r['id']} {r['project']} {r['tier']} {r['score']:.3f} entry #{r['entry_id']} "
            f"guard: {r['guard_reason'] or 'pass'} | {r['request']} ⇄ {r['recorded']}" for r in rows
        )

    @command.command("semula.review.approve")
    def review_approve(self, candidate_id: int) -> str:
        """Approve a review candidate: its request is served the recorded answer (tier alias)."""
        result = self._command("review.approve", {"id": candidate_id})
        return f"semula: approved #{candidate_id}: alias to entry #{result['alias_to']}"

    @command.command("semula.review.reject")
    def review_reject(self, candidate_id: int) -> str:
        """Reject a review candidate: that pairing is never queued or served again."""
        self._command("review.reject", {"id": candidate_id})
        return f"semula: rejected #{candidate_id}"

    @command.command("semula.status")
    def status(self) -> str:
        """Mode, data dir and store state of the semula addon."""
        store = "open" if self.cache else f"unavailable: {self.store_problem}"
        return f"mode {self.mode.value} · data dir {self.settings.data_dir} · store {store}"
