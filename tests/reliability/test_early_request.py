"""A replay proxy serves the requests that arrive while it loads (reliability item 7).

Its first requests used to be refused with "store not open yet": the port accepts before the
store has loaded. A request that comes early now waits for the load (`semula_load_timeout`). The ready
line itself comes before the store has loaded (it opens beside the client's start-up): "early" is
before the recordings folder's load line.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import READY_MARKER, _start_proxy_once, openai_client, uniq

pytestmark = pytest.mark.e2e

COPIES = 3000  # enough recordings that loading them takes a while
LOADED_MARKER = " loaded, "  # "semula: recordings <folder>: N loaded, N unchanged, N removed"


def ask(proxy_url: str, ca_path: Path, text: str) -> str:
    return openai_client(proxy_url, ca_path).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).choices[0].message.content


def wait_until_accepting(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.01)
    raise AssertionError(f"port {port} never accepted")


def test_a_request_sent_before_ready_is_served_not_refused(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    text = f"early bird {uniq('early')}"
    recorder = proxy_factory("auto", extra_args=("--set", f"semula_recordings={folder}"))
    recorded = ask(recorder.proxy_url, recorder.ca_path, text)
    recorder.stop()
    [original] = [p for p in folder.rglob("*.json") if not p.name.startswith("_")]
    data = json.loads(original.read_text())
    assert text in original.read_text()
    for i in range(COPIES):  # other prompts, so every file is its own recording
        (original.parent / f"copy-{i}.json").write_text(json.dumps(data).replace(text, f"{text} copy {i}"))

    data_dir = proxy_factory.new_data_dir("early")  # a fresh store: the whole folder loads at start
    data_dir.mkdir(parents=True)
    replay = _start_proxy_once(mode="replay", data_dir=data_dir, confdir=recorder.confdir,
                               upstream_port=proxy_factory.dead_port, project=None,
                               extra_args=("--set", f"semula_recordings={folder}"))
    proxy_factory.started.append(replay)
    wait_until_accepting(replay.port)
    loaded_before = LOADED_MARKER in replay.output()
    answer = ask(replay.proxy_url, replay.ca_path, text)
    assert answer == recorded, replay.describe()
    assert not loaded_before, "the store had loaded before the request: the test did not send it early"
    assert replay.pump.wait_for(lambda s: s.startswith(READY_MARKER), 60) is not None, replay.describe()
