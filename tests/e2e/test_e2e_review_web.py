"""`semula review web` in a real headless Chromium: the changed word is highlighted, a click on approve writes
the alias file the CLI writes, the `r` key rejects the next candidate, and the replay of the approved request
is a hit (tier alias). The page, the proxy and the replay are all real processes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import openai
import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider, OutputPump, clean_env, openai_client, semula_cmd, stop_process, uniq

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("headless Chromium and its driver are not installed (apt-get install -y chromium chromium-driver)",
                allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def ask(client, text: str, **params):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": text}],
                                                            **params)
    return raw.headers, raw.parse().choices[0].message.content


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


def test_approve_in_the_browser_writes_the_alias_and_the_replay_is_a_hit(proxy_factory: ProxyFactory,
                                                                          fake_provider: FakeProvider, browser,
                                                                          tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    secret = f"sk-proj-{uniq('reviewweb').replace(' ', '-')}"  # planted: it must reach no page or console
    client = openai_client(proxy.proxy_url, proxy.ca_path, api_key=secret, max_retries=0)
    tag = uniq("museum")
    ask(client, f"When does the city museum open on Sunday {tag}")
    # The page opens the store only while it answers (here: through the proxy's admin endpoint), so it can
    # start before anything is queued.
    web = subprocess.Popen([*semula_cmd(), "review", "web", "--data-dir", str(proxy.data_dir), "--no-open"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=clean_env(PYTHONUNBUFFERED="1"), start_new_session=True)
    pump = OutputPump(web.stdout)
    try:
        # Two near-drifts whose forward fails (`user` is in no fingerprint; the fake answers FAIL500 with a
        # 500): auto mode records no answer for them, so their review candidates stay open, as in a replay.
        drifted, other = (f"When does the {word} museum open on Sunday {tag}" for word in ("town", "local"))
        for text in (drifted, other):
            with pytest.raises(openai.InternalServerError):
                ask(client, text, user="FAIL500")
        line = pump.wait_for(lambda s: "semula review web: http://127.0.0.1:" in s, 30)
        assert line is not None, pump.text()
        browser.get(line.split("semula review web: ", 1)[1].split()[0])
        assert "?token=" not in browser.current_url  # the redirect drops it; the cookie carries it
        wait = WebDriverWait(browser, 15)
        cards = {c.find_element(By.CSS_SELECTOR, ".incoming ins.w").text.strip(): c
                 for c in wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "article.card"))}
        assert sorted(cards) == ["local", "town"], "the changed word is highlighted on the request's side"
        card, other_card = cards["town"], cards["local"]
        assert card.find_element(By.CSS_SELECTOR, ".recorded del.w").text.strip() == "city"
        town, local = card.get_attribute("data-id"), other_card.get_attribute("data-id")
        assert secret not in browser.page_source
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
        stop_process(web)
        pump.join()

    before = fake_provider.count()
    headers, answer = ask(client, drifted, user="FAIL500")
    assert headers["x-semula-tier"] == "alias" and answer and fake_provider.count() == before, dict(headers)
    assert "approved #" in pump.text() and "Traceback" not in pump.text(), pump.text()
    assert secret not in pump.text()
