"""Shared fixtures: one fake provider per session, proxies started on demand.

Proxies are expensive (a mitmdump each), the fake is cheap but must keep one counter
for the whole run, so the fake is session-scoped and proxies come from factories that
always stop what they started, even when a test fails half-way.

Under pytest-xdist (scripts/test) a session is one worker: each worker has its own fake provider,
mitmproxy confdir, PostgreSQL and temporary folders, all on free ports and under the worker's
basetemp, so workers share no state; a module whose tests share fixtures runs on one worker
(tests/support/xdist_modules.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))  # the shared helpers (tests/support/)
# Proxies started by tests write no recordings folder into their working directory unless a test
# asks for one (--recordings DIR); the in-process addon and every subprocess inherit this.
os.environ["SEMULA_RECORDINGS"] = "off"

from e2e_helpers import (  # noqa: E402 - needs the sys.path entry above
    FakeProvider,
    ProxyHandle,
    closed_port,
    start_fake_provider,
    start_proxy,
    stop_process,
)


XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test with real semula and fake-provider processes")
    if hasattr(config, "workerinput"):
        # An xdist worker of this suite: the pytest runs our tests start (pytester, `semula exec -- pytest`)
        # must not believe they are workers themselves; xdist and the worker_id fixture read workerinput.
        for name in XDIST_VARIABLES:
            os.environ.pop(name, None)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N` (`--dist load`, xdist's default) and `--dist loadgroup` (scripts/test): a module whose tests share
    state runs on one worker, the rest anywhere. Other `--dist` choices are xdist's own."""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from xdist_modules import ModuleGroupScheduling

    return ModuleGroupScheduling(config, log)


@pytest.fixture(scope="session")
def fake_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProvider]:
    fake = start_fake_provider(tmp_path_factory.mktemp("fakecerts"))
    try:
        yield fake
    finally:
        stop_process(fake.proc)


@pytest.fixture(scope="session")
def mitm_confdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mitmproxy confdir for the session, so every proxy shares one CA."""
    return tmp_path_factory.mktemp("mitmconf")


@pytest.fixture(scope="session")
def dead_port() -> int:
    """Where the provider "went": replay tests map every provider host here."""
    return closed_port()


class ProxyFactory:
    """Starts `semula proxy` processes and guarantees they are stopped.

    `upstream` is "fake" (the session's fake provider), "gone" (a closed port: any
    request that reaches upstream fails) or an explicit port.
    """

    def __init__(self, fake: FakeProvider, confdir: Path, dead_port: int,
                 tmp_factory: pytest.TempPathFactory) -> None:
        self.fake = fake
        self.confdir = confdir
        self.dead_port = dead_port
        self.tmp_factory = tmp_factory
        self.started: list[ProxyHandle] = []

    def new_data_dir(self, name: str = "data") -> Path:
        return self.tmp_factory.mktemp(name) / "semula-data"

    def __call__(self, mode: str, data_dir: Path | None = None, *, upstream: str | int = "fake",
                 project: str | None = None, extra_args: tuple[str, ...] = (), **kwargs: Any) -> ProxyHandle:
        port = {"fake": self.fake.port, "gone": self.dead_port}.get(upstream, upstream) if isinstance(upstream, str) else upstream
        data_dir = data_dir or self.new_data_dir()
        data_dir.mkdir(parents=True, exist_ok=True)
        handle = start_proxy(mode=mode, data_dir=data_dir, confdir=self.confdir, upstream_port=int(port),
                             project=project, extra_args=extra_args, **kwargs)
        self.started.append(handle)
        return handle

    def stop_all(self) -> None:
        for handle in self.started:
            handle.stop()


@pytest.fixture
def proxy_factory(fake_provider: FakeProvider, mitm_confdir: Path, dead_port: int,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyFactory]:
    factory = ProxyFactory(fake_provider, mitm_confdir, dead_port, tmp_path_factory)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def module_proxy_factory(fake_provider: FakeProvider, mitm_confdir: Path, dead_port: int,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyFactory]:
    """Like proxy_factory, for proxies shared by the tests of one module."""
    factory = ProxyFactory(fake_provider, mitm_confdir, dead_port, tmp_path_factory)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An engine on a fresh store, closed afterwards: once on a DuckDB file in a temporary data dir,
    once on a fresh Postgres database (the same behaviour on both)."""
    from semula.engine.engine import Engine
    from semula.store.selection import StoreSpec, open_store

    spec = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    engine = Engine.open(open_store(StoreSpec.parse(spec, tmp_path)))
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def duckdb_engine(tmp_path: Path) -> Iterator[Any]:
    """An engine on a fresh DuckDB file: for what only the embedded store has (its in-memory postings)."""
    from semula.engine.engine import Engine
    from semula.store.selection import StoreSpec, open_store

    engine = Engine.open(open_store(StoreSpec.parse(None, tmp_path)))
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def fake_realtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fake OpenAI Realtime server over TLS WebSockets (tests/support/fake_realtime.py), per test module."""
    from fake_realtime import FakeRealtime

    server = FakeRealtime.start(tmp_path_factory.mktemp("realtime-certs"))
    try:
        yield server
    finally:
        server.stop()


_postgres_skip: list[str] = []


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A throwaway PostgreSQL for the whole run, one per xdist worker (tests/support/pg_helpers.py): a test
    may stop and start it. Skips loudly without binaries, fails instead when SEMULA_REQUIRE_POSTGRES=1 (CI)."""
    import pg_helpers

    try:
        server = pg_helpers.start_postgres()
    except pg_helpers.PostgresUnavailable as e:
        reason = f"PostgreSQL tests cannot run: {e}"
        if pg_helpers.required():
            pytest.fail(f"{reason} ({pg_helpers.REQUIRE_ENV}=1 requires them)", pytrace=False)
        _postgres_skip.append(reason)
        pytest.skip(reason)
    try:
        yield server
    finally:
        pg_helpers.discard(server)


@pytest.fixture
def pg_url(postgres_server: Any) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL."""
    return postgres_server.new_database()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _postgres_skip:
        terminalreporter.write_sep("!", "POSTGRES TESTS SKIPPED", red=True, bold=True)
        terminalreporter.write_line(_postgres_skip[0] + "; install PostgreSQL (initdb, pg_ctl) to run them")
