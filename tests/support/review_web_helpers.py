"""What the `semula review web` end-to-end tests share: a queue of two open candidates made through a
real proxy, the `semula review web` process, and raw HTTP to it (so a test can send any Host, Origin
or token header a hostile page or a rebinding name would)."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import semula_fork
from e2e_helpers import OutputPump, clean_env, openai_client, semula_cmd, stop_process, uniq

MODEL = "gpt-4o-mini"
TOKEN = re.compile(r"token=([A-Za-z0-9_-]+)")


def ask(client: Any, text: str, **params: Any) -> tuple[Any, str]:
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": text}],
                                                            **params)
    return raw.headers, raw.parse().choices[0].message.content


@dataclass
class Queue:
    client: Any
    folder: Path
    data_dir: Path
    tag: str
    drifted: str  # the request the tests approve
    secret: str  # planted in the client's key: it must reach no page or console


def queue_two(proxy_factory: Any, tmp_path: Path) -> Queue:
    """An auto-mode proxy, one recording, and two near-drifts of it left open in the review queue."""
    folder = tmp_path / "semula-recordings"
    proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    secret = f"sk-proj-{uniq('reviewweb').replace(' ', '-')}"
    client = openai_client(proxy.proxy_url, proxy.ca_path, api_key=secret, max_retries=0)
    tag = uniq("museum")
    ask(client, f"When does the city museum open on Sunday {tag}")
    drifted, other = (f"When does the {word} museum open on Sunday {tag}" for word in ("town", "local"))
    # `user` is in no fingerprint; the fake answers FAIL500 with a 500: auto mode records no answer, so the
    # review candidates stay open, as in a replay.
    for text in (drifted, other):
        with pytest.raises(openai.InternalServerError):
            ask(client, text, user="FAIL500")
    return Queue(client, folder, proxy.data_dir, tag, drifted, secret)


@dataclass
class ReviewProcess:
    proc: subprocess.Popen[str] | semula_fork.ForkedProcess
    pump: OutputPump
    url: str  # as printed

    @property
    def port(self) -> int:
        return int(self.url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])

    @property
    def token(self) -> str:
        found = TOKEN.search(self.url)
        assert found, self.url
        return found.group(1)

    def stop(self, signo: int = signal.SIGINT) -> str:
        """Stop it (`signo`, SIGKILL after 20 s); how it ended and what it printed, for assertion messages."""
        if signo != signal.SIGINT and self.proc.poll() is None:
            self.proc.send_signal(signo)
        code = stop_process(self.proc)
        self.pump.join()
        return f"exit code {code} (-9: killed after the grace period)\n{self.pump.text()}"


def start_review_web(data_dir: Path, *args: str, **env: str) -> ReviewProcess:
    """`semula review web` on a data dir (`--no-open` unless other args are given), once it has printed its URL."""
    proc = semula_fork.spawn([*semula_cmd(), "review", "web", "--data-dir", str(data_dir), *(args or ("--no-open",))],
                              env=clean_env(PYTHONUNBUFFERED="1", **env), cwd=Path.cwd())
    pump = OutputPump(proc.stdout)
    line = pump.wait_for(lambda s: "semula review web: http://127.0.0.1:" in s, 30)
    if line is None:
        stop_process(proc)
        pytest.fail(f"semula review web printed no URL:\n{pump.text()}")
    return ReviewProcess(proc, pump, line.split("semula review web: ", 1)[1].split()[0])


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header's values joined by "\n"
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def raw(port: int, method: str, path: str, body: Any = None, **headers: str) -> Answer:
    """One request with exactly these headers (`host` included when given; http.client adds no Origin)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    if data is not None:
        sent.setdefault("content-type", "application/json")
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
        merged: dict[str, str] = {}
        for name, value in response.getheaders():
            merged[name.lower()] = f"{merged[name.lower()]}\n{value}" if name.lower() in merged else value
        return Answer(response.status, merged, text)
    finally:
        connection.close()


def open_candidates(data_dir: Path) -> list[dict[str, Any]]:
    """The open candidates, read through the CLI (through the running proxy's admin endpoint)."""
    from e2e_helpers import run_semula

    done = run_semula("review", "list", "--data-dir", str(data_dir), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
