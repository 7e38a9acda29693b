"""CLI tables in a CI log (stdout a pipe, no terminal) print every value whole, one row a line:
rich's default of 80 columns cut `semula import`'s file names to `default/openai/v1-chat-complet…`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import semula_fork
import pytest

pytestmark = pytest.mark.slow  # runs `semula import` processes: the whole suite runs it, --quick does not

CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a prompt for the pipe"}]})
ANSWER = json.dumps({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})


def har(path: Path) -> Path:
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [{
        "startedDateTime": "2025-01-02T03:04:05Z", "time": 10,
        "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
                    "headers": [{"name": "content-type", "value": "application/json"}],
                    "postData": {"text": CHAT}},
        "response": {"status": 200, "headers": [{"name": "content-type", "value": "application/json"}],
                     "content": {"text": ANSWER}}}]}}))
    return path


def test_import_table_in_a_pipe_prints_the_file_name_whole(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    folder = tmp_path / "recordings-with-a-long-enough-folder-name"
    done = semula_fork.run(
        [sys.executable, "-m", "semula", "import", "--from", "har", str(har(tmp_path / "calls.har")),
         "--recordings", str(folder), "--data-dir", str(tmp_path / "data")], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    written = [p.relative_to(folder).as_posix() for p in folder.rglob("*.json") if not p.name.startswith("_")]
    assert written, done.stdout
    name = written[0]
    assert len(name) > 40, name  # long enough that 80 columns (five columns plus borders) cut it
    rows = [line for line in done.stdout.splitlines() if name in line]
    assert len(rows) == 1, f"{name!r} not whole on one line in:\n{done.stdout}"
    assert str(folder) in done.stdout  # the title too


def test_import_table_at_a_set_width_wraps_and_keeps_every_column(tmp_path: Path) -> None:
    """COLUMNS set (a CI runner that sets it, a narrow pipe): rows wrap to that width, and no column —
    a short status or count — is squeezed out to make room for the long ones."""
    env = {**os.environ, "COLUMNS": "80"}
    done = semula_fork.run(
        [sys.executable, "-m", "semula", "import", "--from", "har", str(har(tmp_path / "calls.har")),
         "--recordings", str(tmp_path / "recordings-with-a-long-enough-folder-name"),
         "--data-dir", str(tmp_path / "data")], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "┃" in line)
    cells = [cell.strip() for cell in header.strip("┃").split("┃")]
    assert all(cells), f"a column squeezed out at 80 columns:\n{done.stdout}"
    table = [line for line in done.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert max(len(line) for line in table) <= 80, done.stdout
