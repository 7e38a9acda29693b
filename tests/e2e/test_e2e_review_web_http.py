"""`semula review web` over raw HTTP, as another local user's server or a DNS-rebinding page would talk to
it: the token is honoured only in its header, a state change also needs this server's Origin and Host,
no answer sets a cookie or can be framed, and the token reaches no log. A real proxy queues the
candidates; the page is the real `semula review web` process (no browser needed: the browser's view of
the same attack is tests/e2e/test_e2e_review_web.py)."""

from __future__ import annotations

import json
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from conftest import ProxyFactory
from review_web_helpers import Answer, ReviewProcess, ask, open_candidates, queue_two, raw, start_review_web

pytestmark = pytest.mark.e2e


def assert_guarded(answer: Answer, what: str) -> None:
    """Every answer, refusals included: no cookie, never framed, never cached, no Referer out."""
    headers = answer.headers
    assert "set-cookie" not in headers, (what, headers)
    assert headers.get("x-frame-options") == "DENY", (what, headers)
    assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), (what, headers)
    assert headers.get("referrer-policy") == "no-referrer" and headers.get("cache-control") == "no-store", \
        (what, headers)
    assert not any(name.startswith("access-control-") for name in headers), (what, headers)


def test_the_token_works_only_in_its_header_with_this_servers_origin_and_host(proxy_factory: ProxyFactory,
                                                                                tmp_path: Path) -> None:
    queue = queue_two(proxy_factory, tmp_path)
    web = start_review_web(queue.data_dir)
    try:
        port, token = web.port, web.token
        assert f"/#token={token}" in web.url, f"the token travels in the fragment, never the query: {web.url}"
        here, origin = f"127.0.0.1:{port}", f"http://127.0.0.1:{port}"
        ids = sorted(c["id"] for c in open_candidates(queue.data_dir))
        assert len(ids) == 2
        answers: list[tuple[str, Answer]] = []

        def send(what: str, method: str, path: str, body=None, **headers: str) -> Answer:
            answer = raw(port, method, path, body, **headers)
            answers.append((what, answer))
            return answer

        # The page itself is a shell: no prompt, no answer, no token, whatever the query says.
        for what, path in (("the shell", "/"), ("a query token", f"/?token={token}"),
                           ("filters", "/?tier=lexical&project=default")):
            shell = send(what, "GET", path, host=here)
            assert shell.status in (200, 400) and queue.tag not in shell.body and token not in shell.body, \
                (what, shell)
            assert "city" not in shell.body and "town" not in shell.body, (what, shell.body)

        # The queue comes only from the API, only with the token header, only on this server's name.
        data = send("the queue", "GET", "/api/queue", host=here, x_semula_token=token)
        assert data.status == 200 and queue.tag in data.json()["html"], data
        for what, headers in (("no token", {}), ("a wrong token", {"x_semula_token": "x" * len(token)}),
                              ("the token as a cookie", {"cookie": f"semula_review_{port}={token}"}),
                              ("the token in the query", {})):
            path = f"/api/queue?token={token}" if what == "the token in the query" else "/api/queue"
            refused = send(what, "GET", path, host=here, **headers)
            assert refused.status in (401, 403) and queue.tag not in refused.body, (what, refused)
        rebound = send("a rebinding name", "GET", "/api/queue", host=f"attacker.example:{port}", x_semula_token=token)
        assert rebound.status == 403 and queue.tag not in rebound.body, rebound
        foreign_read = send("a foreign origin's read", "GET", "/api/queue", host=here, x_semula_token=token,
                            origin="http://127.0.0.1:1")
        assert foreign_read.status == 403 and queue.tag not in foreign_read.body, foreign_read

        # A state change needs the token header, this server's Host and this server's Origin, all three.
        for what, headers in (
                ("no origin", {"host": here, "x_semula_token": token}),
                ("another port's origin", {"host": here, "x_semula_token": token, "origin": "http://127.0.0.1:1"}),
                ("an opaque origin", {"host": here, "x_semula_token": token, "origin": "null"}),
                ("https origin", {"host": here, "x_semula_token": token, "origin": f"https://{here}"}),
                ("a rebinding name", {"host": f"attacker.example:{port}", "x_semula_token": token,
                                      "origin": f"http://attacker.example:{port}"}),
                ("a foreign host, our origin", {"host": f"attacker.example:{port}", "x_semula_token": token,
                                                "origin": origin}),
                ("no token", {"host": here, "origin": origin}),
                ("a cookie, no header", {"host": here, "origin": origin, "cookie": f"semula_review_{port}={token}"}),
                ("a wrong token", {"host": here, "origin": origin, "x_semula_token": token[:-1]})):
            for action in ("approve", "reject"):
                refused = send(what, "POST", f"/api/{action}", {"id": ids[0]}, **headers)
                assert refused.status in (401, 403) and not refused.json()["ok"], (what, action, refused)
        preflight = send("a preflight", "OPTIONS", "/api/approve", host=here, origin="http://127.0.0.1:1",
                         access_control_request_method="POST", access_control_request_headers="x-semula-token")
        assert preflight.status >= 400, preflight
        assert sorted(c["id"] for c in open_candidates(queue.data_dir)) == ids, "nothing was decided"
        assert not list(queue.folder.glob("*/_aliases/*.json")) and not list(queue.folder.glob("*/_rejections/*"))

        approved = send("the page's own approve", "POST", "/api/approve", {"id": ids[0]}, host=here, origin=origin,
                        x_semula_token=token)
        assert approved.status == 200 and approved.json()["ok"], approved
        for what, answer in answers:
            assert_guarded(answer, what)
    finally:
        web.stop()
    headers, _ = ask(queue.client, queue.drifted, user="FAIL500")
    assert headers["x-semula-tier"] == "alias", dict(headers)

    # The token is printed once, in the URL the user opens; no log, file or answer holds it.
    output = web.pump.text()
    assert output.count(token) == 1 and "Traceback" not in output, output
    for root in (queue.data_dir, queue.folder):
        for path in (p for p in root.rglob("*") if p.is_file()):
            assert token.encode() not in path.read_bytes(), path


BROWSER = """#!{python}
import json, os, pathlib, sys
uri = sys.argv[1]
page = pathlib.Path(uri.removeprefix("file://"))
seen = {"argv": sys.argv, "text": page.read_text(), "mode": page.stat().st_mode, "dir_mode": page.parent.stat().st_mode}
saw = pathlib.Path(os.environ["BROWSER_SAW"])
saw.with_suffix(".tmp").write_text(json.dumps(seen))
saw.with_suffix(".tmp").rename(saw)  # whole, or not at all
"""


def open_with_browser(tmp_path: Path, run: str = "run") -> tuple[ReviewProcess, Path]:
    """`review web` with a $BROWSER that reports what it was given; the launch page it got."""
    seen = tmp_path / f"{run}-browser-saw.json"
    script = tmp_path / f"{run}-browser.py"
    script.write_text(BROWSER.replace("{python}", sys.executable))
    script.chmod(0o700)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    # webbrowser runs $BROWSER as one command (no arguments of its own) and waits for it
    web = start_review_web(tmp_path / "data", "--port", "0", BROWSER=str(script), BROWSER_SAW=str(seen),
                           TMPDIR=str(tmp_path / "tmp"))
    deadline = time.monotonic() + 30
    while not seen.exists() and time.monotonic() < deadline and web.proc.poll() is None:
        time.sleep(0.05)  # polling for the browser's report, with a deadline
    if not seen.exists():
        pytest.fail(f"the browser was not started: {web.stop()}")
    saw = json.loads(seen.read_text())
    assert web.token not in " ".join(saw["argv"]) and saw["argv"][1].startswith("file://"), saw["argv"]
    assert f"location.replace({json.dumps(web.url)})" in saw["text"], saw["text"]
    assert stat.S_IMODE(saw["mode"]) == 0o600 and stat.S_IMODE(saw["dir_mode"]) == 0o700, saw
    launcher = Path(saw["argv"][1].removeprefix("file://"))
    assert launcher.parent.parent == tmp_path / "tmp", launcher
    return web, launcher


def test_the_browser_is_started_with_a_private_file_never_the_token(tmp_path: Path) -> None:
    """A command line is readable by every local user (`ps`): the browser gets a 0600 file that redirects."""
    web, launcher = open_with_browser(tmp_path)
    ended = web.stop()
    assert not launcher.parent.exists(), f"the launch file goes when the server stops; {ended}"


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_removes_the_launch_file_too(tmp_path: Path, signo: int) -> None:
    web, launcher = open_with_browser(tmp_path)
    ended = web.stop(signo)
    assert not launcher.parent.exists(), f"the launch file goes when the server stops; {ended}"


def test_the_launch_file_goes_once_the_page_has_the_token(tmp_path: Path) -> None:
    """The file's only job is to hand the token to the tab: the first request that carries it ends it.
    A request without the token (another local user) leaves it for the real browser."""
    web, launcher = open_with_browser(tmp_path)
    try:
        host = f"127.0.0.1:{web.port}"
        assert raw(web.port, "GET", "/api/queue", host=host).status == 401
        assert launcher.exists(), "a request without the token leaves the page alone"
        assert raw(web.port, "GET", "/api/queue", host=host, x_semula_token=web.token).status == 200
        assert not launcher.parent.exists(), "the page reached the server with the token: the file is gone"
    finally:
        web.stop()


def test_a_killed_servers_launch_file_is_swept_at_the_next_start(tmp_path: Path) -> None:
    web, launcher = open_with_browser(tmp_path)
    web.proc.kill()  # SIGKILL: no clean-up of its own
    ended = web.stop()
    assert launcher.parent.exists(), ended
    again, fresh = open_with_browser(tmp_path, "again")
    try:
        assert not launcher.parent.exists(), "the dead server's folder was swept at the next start"
        assert fresh.exists(), "and the new one has its own"
    finally:
        again.stop()
