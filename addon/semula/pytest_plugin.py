"""The pytest plugin (entry point `pytest11: semula`): `pytest --semula=replay` runs the suite through semula.

One proxy for the session — the one `semula exec` starts, from the same code (session/run.py) —,
the client environment in os.environ for the tests and their subprocesses, a summary line at the
end, a `semula_project` marker, and in replay mode a miss fails the test that made it, with semula's
explanation. Without `--semula` the plugin only registers its options and marker.

Each session's calls carry a tag of their own (the proxy password `semula-<tag>`; an xdist worker's
is `<tag>.gw0`), and at each test's start and end the plugin tells the proxy which test the tag is in
(proxy/run/scopes.py). So a refusal is the test's that made it — one made between tests, or after its
test ended, fails no test and is listed in the session summary —; repeats (`semula_repeats=sequence`,
the plugin's default) count from 1 in each test of each session, also on a reused proxy; and
`--semula-scope=test` keeps each test's recordings apart (core/scope.py).
Under pytest-xdist the controller starts the one proxy and the workers share it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from semula.core.modes import Mode
from semula.pytest_placeholders import PlaceholderGuard

MARKER = "semula_project"
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
_STAY = object()  # a refusals call that moves the proxy to no other test


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("semula", "semula: record and replay LLM API calls")
    group.addoption("--semula", dest="semula_mode", choices=[m.value for m in Mode], default=None,
                    help="run the session through one semula proxy in this mode (replay: a miss fails its test)")
    group.addoption("--semula-recordings", dest="semula_recordings", default=None, metavar="DIR",
                    help="recordings folder [default: ./semula-recordings, or $SEMULA_RECORDINGS]")
    group.addoption("--semula-data-dir", dest="semula_data_dir", default=None, metavar="DIR",
                    help="semula's data dir [default: ./.semula, or $SEMULA_DATA_DIR]")
    group.addoption("--semula-project", dest="semula_project", default="default", metavar="NAME",
                    help="the session's project (a test's @pytest.mark.semula_project(NAME) overrides it)")
    group.addoption("--semula-set", dest="semula_sets", action="append", default=[], metavar="NAME=VALUE",
                    help="any mitmproxy or semula_* option for the proxy, like `semula proxy --set`")
    group.addoption("--semula-extra-host", dest="semula_extra_hosts", action="append", default=[], metavar="HOST",
                    help="also intercept HOST, keeping the default hosts (an OpenAI-compatible API, a CDN a test "
                         "needs offline); repeatable")
    group.addoption("--semula-mcp-server", dest="semula_mcp_servers", action="append", default=[],
                    metavar="HOST[:PORT][/PATH]",
                    help="record and replay this MCP server's Streamable HTTP traffic; repeatable")
    group.addoption("--semula-intercept-all", dest="semula_intercept_all", action="store_true", default=False,
                    help="decrypt every HTTPS host (the others forwarded untouched, never recorded): clients trust "
                         "semula's CA alone, ~30 ms less per SDK client; breaks certificate pinning and client "
                         "certificates to other hosts (docs/performance.md)")
    group.addoption("--semula-scope", dest="semula_scope", choices=["project", "test"], default="project",
                    help="project: one answer per request per project; test: each test keeps its own recordings "
                         "[default: project]")
    group.addoption("--semula-port", dest="semula_port", type=int, default=0, metavar="N",
                    help="the port the proxy listens on [default: 0, a free one]")
    group.addoption("--semula-host", dest="semula_host", default="127.0.0.1", metavar="HOST",
                    help="the address the proxy listens on [default: 127.0.0.1]")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(name): send this test's calls to semula project NAME "
                                       "(clients it creates; see docs/pytest.md)")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: the controller's proxy is shared
        if "semula" in workerinput:
            plugin = SemulaPlugin.for_worker(workerinput["semula"], workerinput.get("workerid", "w"))
            config.pluginmanager.register(plugin, "semula-session")
            PlaceholderGuard.register(config, plugin.saved)
        return
    if config.getoption("semula_mode"):
        plugin = SemulaPlugin.start(config)
        config.pluginmanager.register(plugin, "semula-session")
        PlaceholderGuard.register(config, plugin.saved)
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistController(plugin), "semula-xdist")


@dataclass
class Proxy:
    """What a worker needs to use the controller's proxy (it travels in xdist's workerinput)."""

    mode: str
    port: int
    host: str
    data_dir: str
    confdir: str
    project: str
    sets: list[str]
    tag: str = ""  # the session's tag (its workers' are `<tag>.gw0`…): the proxy knows its calls by it
    scope: str = "project"  # --semula-scope


# eq=False: pluggy and pytest keep registered plugins in sets and dicts (pytest 9's parsefactories,
# pluggy's subset_hook_caller below a nested conftest.py), so a plugin object must stay hashable by identity.
@dataclass(eq=False)
class SemulaPlugin:
    """The session's proxy, the environment it set, and the refusals already attributed to a test."""

    proxy: Proxy
    tag: str = ""  # this process's calls' tag: the session's, or its xdist worker's
    worker: bool = False  # an xdist worker: the controller prints the summary
    tracking: bool = False  # the proxy is told which test runs (`tests.enter`, proxy/run/scopes.py)
    entered: str | None = None  # the test the proxy was last told runs (None: none)
    next_test: str | None = None  # the test pytest runs after the current one
    proxy_variables: tuple[str, ...] = PROXY_VARIABLES  # those client_env set (HTTP_PROXY only for plain HTTP)
    no_test: list[dict[str, Any]] = field(default_factory=list)  # refusals of calls made outside any test
    session: Any = None  # a ProxySession in the process that started or reused the proxy
    saved: dict[str, str | None] = field(default_factory=dict)
    last_refusal: int | None = None
    status_lines: list[str] = field(default_factory=list)
    summary: str = ""
    admin_problem: str = ""
    shown: int = 0  # status lines already in the report header
    admin_info: dict[str, Any] | None = None  # the proxy's admin.json, read once
    admin: Any = None  # an AdminClient: one kept-alive connection for the 3-4 calls of every test
    signals: Any = None  # StopSignals: SIGTERM/SIGHUP end the session through pytest_sessionfinish

    @classmethod
    def start(cls, config: pytest.Config) -> SemulaPlugin:
        from semula.session.clientenv import command_sets
        from semula.session.run import BadOption, SessionError, default_data_dir, open_session
        from semula.session.signals import StopSignals

        mode = config.getoption("semula_mode")
        host, port = config.getoption("semula_host"), config.getoption("semula_port")
        if not 0 <= port <= 65535:
            raise pytest.UsageError(f"semula: --semula-port {port} is not a port (0-65535; 0: a free one)")
        data_dir = Path(config.getoption("semula_data_dir") or default_data_dir())
        recordings = config.getoption("semula_recordings")
        sets = command_sets(Path(recordings) if recordings else None, False,
                            tuple(config.getoption("semula_extra_hosts")), tuple(config.getoption("semula_mcp_servers")),
                            config.getoption("semula_intercept_all")) + tuple(config.getoption("semula_sets"))
        _refuse_bad_options(sets)
        lines: list[str] = []
        try:
            session = open_session(mode, host, port, data_dir, config.getoption("semula_project"), sets,
                                   60.0, lines.append)
        except BadOption as e:
            raise pytest.UsageError(f"semula: {e}") from None
        except SessionError as e:
            raise pytest.UsageError(f"semula: cannot start the proxy: {e}: pytest --semula={mode} "
                                    "--semula-data-dir DIR") from None
        if port and session.port != port:
            lines.append(f"semula: --semula-port {port} not used: the proxy already running on {data_dir} "
                         f"listens on {session.port}")
        tag = f"s{secrets.token_hex(4)}"  # a new tag per session: its repeats count from 1 on a reused proxy
        proxy = Proxy(mode, session.port, session.host, str(data_dir), str(session.confdir), session.project,
                      list(sets), tag, config.getoption("semula_scope"))
        plugin = cls(proxy, tag=tag, session=session, status_lines=lines)
        plugin.set_environment()
        if proxy.scope == "test" and not plugin.tracking:
            session.stop()
            raise pytest.UsageError(f"semula: --semula-scope=test needs a proxy that knows which test runs: "
                                    f"{plugin.admin_problem}")
        plugin.signals = StopSignals(_stopped).install()  # restored in pytest_unconfigure
        return plugin

    @classmethod
    def for_worker(cls, proxy: dict[str, Any], worker: str) -> SemulaPlugin:
        shared = Proxy(**proxy)
        plugin = cls(shared, tag=f"{shared.tag}.{worker}" if shared.tag else worker, worker=True)
        plugin.set_environment()
        return plugin

    # --- the environment -------------------------------------------------------------------

    def client_env(self) -> dict[str, str | None]:
        from semula.session.run import run_env

        p = self.proxy
        return run_env(p.mode, tuple(p.sets), p.host, p.port, Path(p.confdir), os.environ, *self.credentials())

    def proxy_url(self, project: str) -> str:
        from semula.session.clientenv import proxy_url

        return proxy_url(self.proxy.host, self.proxy.port, *self.credentials(project))

    def credentials(self, project: str | None = None) -> tuple[str | None, str]:
        """The proxy user (project) and password; a tagged worker always sends both: the tag is the password."""
        p = self.proxy
        project = project or (p.project if self.tag or p.project != "default" else None)
        return project, f"semula-{self.tag}" if self.tag else "semula"

    def set_environment(self) -> None:
        env = self.client_env()
        self.proxy_variables = tuple(name for name in PROXY_VARIABLES if name in env)
        for name, value in env.items():
            self.saved.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.last_refusal = self._refusals_since(None)["last"]
        self.tracking = True
        self.tracking = self._enter(None)  # also asks whether the proxy can be told (an older one cannot)

    def restore_environment(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.saved.clear()

    # --- hooks -----------------------------------------------------------------------------

    # Old-style hook wrappers: they work with every pytest that has pytest11 plugins, not only pytest 8.
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        # From setup to teardown, this tag's calls are this test's. The proxy is told once per test: the
        # previous test's last call (its teardown's refusals in replay) already named this one.
        self.next_test = nextitem.nodeid if nextitem is not None else None
        if self.entered != item.nodeid:
            self._enter(item.nodeid)
        marker = item.get_closest_marker(MARKER)
        before = {name: os.environ.get(name) for name in PROXY_VARIABLES}
        if marker is not None and marker.args:  # the proxy variables this run set, with the marker's project
            os.environ.update(dict.fromkeys(self.proxy_variables, self.proxy_url(str(marker.args[0]))))
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            if self.entered != self.next_test:
                self._enter(self.next_test)

    def _enter(self, test: str | None) -> bool:
        """Tell the proxy which test this tag's calls now belong to (None: none); False if it cannot be told."""
        from semula.admin.protocol import AdminError, NoProxy
        from semula.proxy.run.scopes import CurrentTests

        if not self.tracking:
            return False
        try:
            self._admin().call(CurrentTests.METHOD, self._entering(test))
            self.entered = test
        except (AdminError, NoProxy) as e:  # an older proxy reused: refusals go to whichever test runs
            self.tracking = False
            self.entered = None
            self.admin_problem = self.admin_problem or f"semula: the proxy cannot be told which test runs ({e})"
        return self.tracking

    def _entering(self, test: str | None) -> dict[str, Any]:
        return {"tag": self.tag, "test": test, "scope": self.proxy.scope}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, Any, None]:  # receives pluggy's Result
        outcome = yield
        report = outcome.get_result()
        if self.proxy.mode != Mode.REPLAY.value or (report.when == "setup" and report.passed):
            return  # only replay refuses; a passed setup's refusals are found after the call
        refusals = []
        then = report.when == "teardown" and self.tracking  # the test is over: the proxy moves on in the same call
        for refusal in self._new_refusals(self.next_test if then else _STAY):
            if not self.tracking or refusal.get("test") == item.nodeid:
                refusals.append(refusal)
            elif not self.worker:  # another test's or none's: the session summary lists it
                self.no_test.append(refusal)
        if refusals and report.outcome != "skipped":
            text = "\n\n".join(f"This test made a call that semula refused in replay mode:\n{r['message']}"
                                 for r in refusals)
            if report.passed:
                report.outcome = "failed"
                report.longrepr = text
            else:
                report.sections.append(("semula: replay misses", text))

    def _new_refusals(self, then: str | None | object = _STAY) -> list[dict[str, Any]]:
        """The refusals since the last ones seen; `then` (unless _STAY): the test the proxy moves on to."""
        if self.last_refusal is None:
            return []
        if then is _STAY and self._published_refusal() == self.last_refusal:
            return []  # none since: the proxy wrote the number before any 404 went out
        answer = self._refusals_since(self.last_refusal, then)
        self.last_refusal = answer["last"]
        return answer["refusals"]

    def _published_refusal(self) -> int | None:
        """The last refusal's number as the proxy keeps it beside admin.json (proxy/run/refusals.py), read
        without a round trip; None when it keeps none (an older proxy) or the file cannot be read."""
        path = (self.admin_info or {}).get("refusals_file")
        if not isinstance(path, str):
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                text = os.read(fd, 32)
            finally:
                os.close(fd)
            return int(text) if text.isdigit() else None
        except (OSError, ValueError):
            return None

    def _refusals_since(self, after: int | None, then: str | None | object = _STAY) -> dict[str, Any]:
        from semula.admin.protocol import AdminError, NoProxy
        from semula.proxy.run.refusals import Refusals

        # The session's tag also finds its workers' calls; untagged calls (a client given another proxy URL)
        # belong to no test, and the process that prints the summary lists them.
        params: dict[str, Any] = {"after": after, "tag": self.tag or None, "untagged": not self.worker}
        if then is not _STAY:
            params["enter"] = self._entering(then if isinstance(then, str) else None)
        try:
            answer = self._admin().call(Refusals.METHOD, params)
            if "enter" in params and "entered" in answer:  # an older proxy ignores it: _enter tells it after
                self.entered = params["enter"]["test"]
            return answer
        except (AdminError, NoProxy) as e:
            # An older proxy reused, or admin off: misses still get the clear 404, tests are not failed here.
            self.admin_problem = f"semula: cannot ask the proxy for refusals ({e}); replay misses do not fail tests"
            return {"last": None, "refusals": []}

    def _admin(self) -> Any:
        from semula.admin.client import AdminClient
        from semula.admin.protocol import NoProxy, read_admin_info

        if self.admin is None:
            self.admin_info = self.admin_info or read_admin_info(self.proxy.data_dir)
            if self.admin_info is None:
                raise NoProxy(str(self.proxy.data_dir))
            self.admin = AdminClient(self.proxy.data_dir, self.admin_info)
        return self.admin

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        self.shown = len(self.status_lines)
        return self.status_lines[:self.shown]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.worker and self.proxy.mode == Mode.REPLAY.value:
            # After the last test (and, under xdist, all the workers' tests): what came outside any test.
            self.no_test += [r for r in self._new_refusals() if not r.get("test")]
        if self.session is not None:  # stop before the terminal summary: it reads the flushed call log
            if self.signals is not None:
                self.signals.hold()  # a signal now must not interrupt the stop
            self.summary = self.session.stop()
            self.session = None
            if self.signals is not None and self.signals.received:  # pytest prints no terminal summary then
                reporter = session.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    reporter.write_line(self.summary)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker:
            return
        lines = self.status_lines[self.shown:]
        terminalreporter.write_sep("-", "semula")
        for line in [*lines, *([self.admin_problem] if self.admin_problem else []), self.summary]:
            if line:
                terminalreporter.write_line(line)
        if self.no_test:
            terminalreporter.write_line(
                f"semula: {len(self.no_test)} call(s) refused in replay outside any test (between tests, after "
                "their test ended, or from a client without the session's proxy settings); no test failed for them:")
            for refusal in self.no_test:
                where = f" (during {refusal['test']}, from another test)" if refusal.get("test") else ""
                terminalreporter.write_line(f"- project {refusal.get('project')}{where}: {refusal['message']}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.signals is not None:
            self.signals.restore()
        if self.admin is not None:
            self.admin.close()
        if self.session is not None:  # the session never got to its end (a usage error, say)
            self.session.stop()
            self.session = None
        self.restore_environment()


def _refuse_bad_options(sets: tuple[str, ...]) -> None:
    """A misspelt or bad semula option (`--semula-set`, SEMULA_* variables) is a usage error: no proxy starts."""
    from semula.session.optioncheck import OptionError, check_run_options

    try:
        check_run_options(sets, os.environ, where="--semula-set")
    except OptionError as e:
        raise pytest.UsageError(f"semula: {e}") from None


def _stopped(signo: int) -> BaseException:
    """SIGTERM/SIGHUP: pytest's own exit, which still runs pytest_sessionfinish (the proxy stopped, its call
    log flushed) and makes pytest exit with the signal's code."""
    import signal

    return pytest.exit.Exception(f"semula: stopped by {signal.Signals(signo).name}", returncode=128 + signo)


class XdistController:
    """Registered only when pytest-xdist is installed: hand the proxy to each worker."""

    def __init__(self, plugin: SemulaPlugin) -> None:
        self.plugin = plugin

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["semula"] = vars(self.plugin.proxy)


@pytest.fixture
def semula(request: pytest.FixtureRequest) -> SemulaTest:
    """The semula proxy of this test: its mode, project and the proxy URL / headers to send calls to it."""
    plugin = request.config.pluginmanager.get_plugin("semula-session")
    if plugin is None:
        pytest.skip("semula is off: run pytest --semula=MODE")
    marker = request.node.get_closest_marker(MARKER)
    project = str(marker.args[0]) if marker and marker.args else plugin.proxy.project
    return SemulaTest(plugin.proxy.mode, project, plugin.proxy_url(project), {"x-semula-project": project})


@dataclass(frozen=True)
class SemulaTest:
    mode: str
    project: str
    proxy_url: str  # this test's project in the proxy user: for a client created inside the test
    headers: dict[str, str]  # or send these headers on a client that has the session's proxy URL
