"""The addon's life: start the logs, the store and the admin endpoint; say it is ready; stop cleanly.

A plain part of `SemulaAddon`, whose `running` and `done` hooks call it with the current mode and settings.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import logging
import os
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mitmproxy import ctx

from semula.core.modes import Mode
from semula.core.settings import AddonSettings
from semula.admin.protocol import fallback_admin_dir, read_admin_info
from semula.admin.server import AdminServer
from semula.proxy.run.terminal import TERMINAL_SAFE_LOG
from semula.proxy.run.expiry import StaleWarnings
from semula.proxy.run import runinfo
from semula.proxy.run.refusals import Refusals
from semula.proxy.run.scopes import CurrentTests
from semula.recordings.files import remember_user_umask
from semula.proxy.run.startup import EngineStart
from semula.proxy.run.storethread import StoreThread
from semula.calllog.schema import CALL_LOG_SCHEMA_VERSION, REVIEW_LOG_SCHEMA_VERSION, CallRow, ReviewEvent
from semula.store.datadir import make_data_dir
from semula.store.selection import StoreSpec
from semula.calllog.writer import ParquetLog
from semula.calllog.tally import STOPPED, Tally

if TYPE_CHECKING:  # fastembed (behind the model) is loaded only when the tier is on
    from semula.embeddings.model import Embedder
    from semula.proxy.run.otel import CallSpans  # OpenTelemetry's SDK too, only when spans are on

log = logging.getLogger("semula")


class Lifecycle:
    """Start-up and shut-down of the store thread, the call and review logs and the admin endpoint."""

    def __init__(self, dispatch: Callable[[str, dict[str, Any]], Any]) -> None:
        self.dispatch = dispatch  # the admin operations that run on the store (`SemulaCommands.dispatch`)
        log.addFilter(TERMINAL_SAFE_LOG)
        self.store = StoreThread()
        self.calls: ParquetLog | None = None
        self.tally = Tally()  # this proxy's calls by outcome, said when it stops
        self.reviews: ParquetLog | None = None
        self.embedder: Embedder | None = None  # the embedding tier's model, once loaded (`_load_embedder`)
        self.admin: AdminServer | None = None
        self.spans: CallSpans | None = None  # OpenTelemetry, when the user opted in (semula_otel)
        self.refusals = Refusals()  # replay refusals, numbered: the pytest plugin asks for them
        self.tests = CurrentTests()  # the test each run tag is in: the pytest plugin says so
        self.expiry = StaleWarnings()  # a project's max_age on hits: each old one served is warned about once
        self.started: AddonSettings | None = None  # the settings `running` started with (`RESTART_OPTIONS`)
        self._store_opening: asyncio.Future[None] | None = None
        self.run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"

    def admin_call(self, method: str, params: dict[str, Any]) -> Any:
        """An admin endpoint call: the proxy's own memory (refusals, current tests), else a store operation."""
        if method == Refusals.METHOD:  # the proxy's own memory, not the store
            answer = self.refusals.answer(params)
            if isinstance(params.get("enter"), dict):  # the pytest plugin: a test ended, the next one starts
                try:
                    answer["entered"] = self.tests.answer(params["enter"])
                except ValueError:
                    pass  # no "entered": the plugin asks `tests.enter` itself, which names the problem
            return answer
        if method == CurrentTests.METHOD:
            return self.tests.answer(params)
        return self.dispatch(method, params)

    async def running(self, mode: Mode, settings: AddonSettings) -> None:
        self.started = settings
        data_dir = Path(settings.data_dir)
        if not settings.read_only and not data_dir.exists():
            _private_data_dir(data_dir)  # created 0700, then checked like one that was there
        untrusted = None if settings.read_only else _untrusted_data_dir(data_dir)
        if untrusted:
            print(f"semula: not writing to the data dir {data_dir} ({untrusted}): whoever can write it could "
                  "plant links there to read the admin token, prompts and answers; serving it read-only "
                  f"instead (admin.json in {fallback_admin_dir(data_dir)}). To record, make it a directory of "
                  "yours only you can write (chown, chmod go-w), or use another --data-dir", flush=True)
        spec = StoreSpec.parse(settings.store, data_dir)
        read_only = settings.read_only or bool(untrusted) or _not_writable(data_dir, spec.file)
        spec = spec.reading_only(read_only)
        if not read_only:
            _private_data_dir(data_dir)
        # A read-only data dir (a mounted CI cache), or one other users can write: the logs go to a
        # temporary directory, admin.json to the data dir's fallback_admin_dir, where the CLI finds it.
        log_dir = Path(tempfile.mkdtemp(prefix="semula-logs-")) if read_only else data_dir
        if settings.embeddings and not await self._load_embedder(data_dir):
            return
        self.calls = ParquetLog(log_dir / "calls", CallRow, CALL_LOG_SCHEMA_VERSION)
        if settings.otel != "off":
            from semula.proxy.run.otel import CallSpans

            self.spans = CallSpans.start(settings)
        self.reviews = ParquetLog(log_dir / "reviews", ReviewEvent, REVIEW_LOG_SCHEMA_VERSION)
        ignore = (settings.default_project, settings.ignore) if settings.ignore is not None else None
        self.store.configure(EngineStart(spec, settings.data_dir, settings.recordings, self._log_review,
                                         self.embedder, ignore), settings.load_timeout)
        # The store opens (DuckDB, its migrations, the index) beside the client's own start-up, not before
        # the ready line: a request that comes first waits for it (`StoreThread.ensure_open`).
        self._store_opening = asyncio.ensure_future(self._open_store())
        listen = self._listen_address(settings)
        confdir = Path(os.path.expanduser(settings.confdir))
        other = read_admin_info(data_dir)
        if other is not None and other.get("pid") != os.getpid():
            print(f"semula: another semula proxy (pid {other.get('pid')}, {other.get('proxy')}) holds {data_dir}: "
                  "this one cannot use its store and forwards calls unrecorded (replay: refuses them). "
                  "Stop the other proxy, point clients at it, or use another --data-dir.", flush=True)
        elif settings.admin:
            try:
                self.admin = AdminServer(data_dir, self.admin_call, {
                    "proxy": listen, "mode": mode.value, "data_dir": str(data_dir),
                    "project": settings.default_project, "confdir": str(confdir),
                    "run": runinfo.published(),  # what it was asked: a run reuses it only if it asks the same
                }, fallback=read_only, beside=self.refusals.publish)
            except OSError as e:
                log.warning("semula: admin endpoint not started (%s); CLI commands cannot reach this proxy", e)
        bound = self._listen_address(settings, connectable=False)
        if not _is_loopback(bound):
            print(f"semula: WARNING: listening on {bound}, not on loopback: anyone who can reach this machine "
                  "can use the proxy, read recorded answers and send calls with the keys it sees. "
                  "Use --listen-host 127.0.0.1 unless other machines must reach it.", flush=True)
        store_note = f" · shared store {spec.describe()}" if spec.file is None else ""
        ready = "semula ready"
        if read_only:
            store_note += f" · read-only: the store is not written; call log and review log in {log_dir}"
        print(
            f"{ready}: {bound} · mode {mode.value} · data dir {data_dir} · "
            f"CA {confdir / 'mitmproxy-ca-cert.pem'}{store_note}",
            flush=True,
        )

    async def store_opened(self) -> None:
        """Wait for the store opening `running` started (what needs the engine at once: tests, tools)."""
        if self._store_opening is not None:
            await asyncio.shield(self._store_opening)

    async def _open_store(self) -> None:
        await self.store.ensure_open(force=True)
        if self.store.engine is None:
            print(f"semula: NOT recording: store unavailable: {self.store.problem}", flush=True)
        elif self.started is not None and not self.started.recordings:  # else the folder's load line says so
            print("semula: store open (no recordings folder)", flush=True)
        # The near-match guard's lexicons are imported on the first near-match, not before the ready line:
        # loaded here, once the store is open, so that first near-match does not wait for them.
        threading.Thread(target=_import_quietly, args=("semula.core.guard.check", "semula.core.guard.language"),
                         daemon=True, name="semula-warm").start()

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

    @staticmethod
    def _listen_address(settings: AddonSettings, connectable: bool = True) -> str:
        """The proxy's address: as bound (the ready line), or one a local client can connect to."""
        try:
            addrs = ctx.master.addons.get("proxyserver").listen_addrs()
            host, port = addrs[0][0], addrs[0][1]
        except Exception:
            host, port = settings.listen_host or "127.0.0.1", settings.listen_port or 8080
        if host == "":
            host = "0.0.0.0"
        if connectable and host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def _log_review(self, row: ReviewEvent) -> None:
        if self.reviews is not None:
            self.reviews.append(row)

    def done(self) -> None:
        if self.admin:
            self.admin.close()
            self.admin = None
        self.refusals.close()
        for log_writer in (self.calls, self.reviews):
            if log_writer and (lost := log_writer.close()):
                print(f"semula: {lost} log rows could not be written to {log_writer.directory} and are lost"
                      f" ({log_writer.last_error or 'see the errors above'})", flush=True)
        self.calls = self.reviews = None
        if self.spans is not None:
            self.spans.close()
            self.spans = None
        self.store.close()
        print(f"{STOPPED}{self.tally.text()}", flush=True)


def _is_loopback(url: str) -> bool:
    host = url.split("//", 1)[1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _not_writable(data_dir: Path, store_file: Path | None) -> bool:
    """A data dir that exists but cannot be written, or whose store file cannot (a read-only mount)."""
    if store_file is not None and store_file.exists() and not os.access(store_file, os.W_OK):
        return True
    return data_dir.is_dir() and not os.access(data_dir, os.W_OK)


def _untrusted_data_dir(data_dir: Path) -> str | None:
    """Why semula must not write into `data_dir`, or None. A directory owned by another user, or that
    its group or others can write, lets them put a link where admin.json, the store or the logs will
    be (a sticky bit does not stop them creating names first)."""
    try:
        st = os.stat(data_dir)
    except OSError:
        return None  # missing or unreachable: the store and logs say so
    if not stat.S_ISDIR(st.st_mode):
        return None
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o002 or (st.st_mode & 0o020 and not _private_group(st.st_gid)):
        who = "other users" if st.st_mode & 0o002 else f"its group (gid {st.st_gid})"
        return f"{who} can write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _private_group(gid: int) -> bool:
    """A user private group (umask 002 systems): named after this user, their primary group, no other member."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(os.getuid()), grp.getgrgid(gid)
    except KeyError:
        return False
    return gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _private_data_dir(data_dir: Path) -> None:
    """Store and logs are readable by their owner only: a data dir semula creates is 0700, and the
    files semula writes there are created 0600 by the code that writes them (store, logs, admin.json).

    A directory the user gave that already exists (such as `.`) keeps its mode. If others may enter
    it, the umask becomes 077: DuckDB takes no file mode and recreates its WAL (prompts and answers)
    at every checkpoint with the process umask, so only the umask keeps that file private there."""
    if not data_dir.exists():
        try:
            make_data_dir(data_dir)
        except OSError as e:  # the store and logs say so when they cannot write
            log.warning("semula: cannot create the data dir %s: %s", data_dir, e)
        return
    if data_dir.stat().st_mode & 0o077:
        remember_user_umask(os.umask(0o077))  # the recordings folder keeps the user's


def _import_quietly(*modules: str) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:  # the near-match that needs it imports it again and says why
            log.warning("semula: loading %s failed: %s", module, e)
