"""The pytest plugin (entry point `pytest11: semula`): `pytest --semula=replay` runs the suite through semula.

One proxy for the session — the one `semula exec` starts, from the same code (cli/session.py) —,
the client environment in os.environ for the tests and their subprocesses, a summary line at the
end, a `semula_project` marker, and in replay mode a miss fails the test that made it, with semula's
explanation. Without `--semula` the plugin only registers its options and marker.

Under pytest-xdist the controller starts the one proxy and the workers share it; each worker's calls
carry its own tag (the proxy password `semula-<worker>`), so each asks for its own refusals.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from semula.core.modes import Mode

MARKER = "semula_project"
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(name): send this test's calls to semula project NAME "
                                       "(clients it creates; see the README's pytest section)")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: the controller's proxy is shared
        if "semula" in workerinput:
            plugin = SemulaPlugin.for_worker(workerinput["semula"], workerinput.get("workerid", "w"))
            config.pluginmanager.register(plugin, "semula-session")
        return
    if config.getoption("semula_mode"):
        plugin = SemulaPlugin.start(config)
        config.pluginmanager.register(plugin, "semula-session")
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


@dataclass
class SemulaPlugin:
    """The session's proxy, the environment it set, and the refusals already attributed to a test."""

    proxy: Proxy
    tag: str = ""  # the xdist worker's tag; "" outside xdist
    session: Any = None  # a ProxySession in the process that started or reused the proxy
    saved: dict[str, str | None] = field(default_factory=dict)
    last_refusal: int | None = None
    status_lines: list[str] = field(default_factory=list)
    summary: str = ""
    admin_problem: str = ""
    shown: int = 0  # status lines already in the report header
    admin_info: dict[str, Any] | None = None  # the proxy's admin.json, read once

    @classmethod
    def start(cls, config: pytest.Config) -> SemulaPlugin:
        from semula.cli.common import default_data_dir
        from semula.cli.proxy_cmd import recordings_sets
        from semula.cli.session import SessionError, open_session

        mode = config.getoption("semula_mode")
        data_dir = Path(config.getoption("semula_data_dir") or default_data_dir())
        recordings = config.getoption("semula_recordings")
        sets = recordings_sets(Path(recordings) if recordings else None, False) + tuple(
            config.getoption("semula_sets"))
        lines: list[str] = []
        try:
            session = open_session(mode, "127.0.0.1", 0, data_dir, config.getoption("semula_project"), sets,
                                   60.0, lines.append)
        except SessionError as e:
            raise pytest.UsageError(f"semula: cannot start the proxy: {e}: pytest --semula={mode} "
                                    "--semula-data-dir DIR") from None
        proxy = Proxy(mode, session.port, session.host, str(data_dir), str(session.confdir), session.project,
                      list(sets))
        plugin = cls(proxy, session=session, status_lines=lines)
        plugin.set_environment()
        return plugin

    @classmethod
    def for_worker(cls, proxy: dict[str, Any], worker: str) -> SemulaPlugin:
        plugin = cls(Proxy(**proxy), tag=worker)
        plugin.set_environment()
        return plugin

    # --- the environment -------------------------------------------------------------------

    def client_env(self) -> dict[str, str]:
        from semula.cli.session import run_env

        p = self.proxy
        return run_env(p.mode, tuple(p.sets), p.host, p.port, Path(p.confdir), os.environ, *self.credentials())

    def proxy_url(self, project: str) -> str:
        from semula.cli.proxy_cmd import proxy_url

        return proxy_url(self.proxy.host, self.proxy.port, *self.credentials(project))

    def credentials(self, project: str | None = None) -> tuple[str | None, str]:
        """The proxy user (project) and password; a tagged worker always sends both: the tag is the password."""
        p = self.proxy
        project = project or (p.project if self.tag or p.project != "default" else None)
        return project, f"semula-{self.tag}" if self.tag else "semula"

    def set_environment(self) -> None:
        for name, value in self.client_env().items():
            self.saved.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        self.last_refusal = self._refusals_since(None)["last"]

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
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        marker = item.get_closest_marker(MARKER)
        if marker is None or not marker.args:
            yield
            return
        before = {name: os.environ.get(name) for name in PROXY_VARIABLES}
        os.environ.update(dict.fromkeys(PROXY_VARIABLES, self.proxy_url(str(marker.args[0]))))
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()
        if self.proxy.mode != Mode.REPLAY.value or (report.when == "setup" and report.passed):
            return  # only replay refuses; a passed setup's refusals are found after the call
        refusals = self._new_refusals()
        if refusals and report.outcome != "skipped":
            text = "\n\n".join(f"This test made a call that semula refused in replay mode:\n{r['message']}"
                                 for r in refusals)
            if report.passed:
                report.outcome = "failed"
                report.longrepr = text
            else:
                report.sections.append(("semula: replay misses", text))

    def _new_refusals(self) -> list[dict[str, Any]]:
        if self.last_refusal is None:
            return []
        answer = self._refusals_since(self.last_refusal)
        self.last_refusal = answer["last"]
        return answer["refusals"]

    def _refusals_since(self, after: int | None) -> dict[str, Any]:
        from semula.proxy.admin import AdminError, NoProxy, call, read_admin_info

        try:
            self.admin_info = self.admin_info or read_admin_info(self.proxy.data_dir)
            return call(self.proxy.data_dir, "refusals.since", {"after": after, "tag": self.tag or None},
                        timeout=10, info=self.admin_info)
        except (AdminError, NoProxy) as e:
            # An older proxy reused, or admin off: misses still get the clear 404, tests are not failed here.
            self.admin_problem = f"semula: cannot ask the proxy for refusals ({e}); replay misses do not fail tests"
            return {"last": None, "refusals": []}

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        self.shown = len(self.status_lines)
        return self.status_lines[:self.shown]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.session is not None:  # stop before the terminal summary: it reads the flushed call log
            self.summary = self.session.stop()
            self.session = None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.tag:
            return
        lines = self.status_lines[self.shown:]
        terminalreporter.write_sep("-", "semula")
        for line in [*lines, *([self.admin_problem] if self.admin_problem else []), self.summary]:
            if line:
                terminalreporter.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.session is not None:  # the session never got to its end (a usage error, say)
            self.session.stop()
            self.session = None
        self.restore_environment()


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
