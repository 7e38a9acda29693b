"""`semula report`: a kernel that dies before it answers (its TCP port taken between the pick and the bind)
gets a new kernel, since no cell ran; a kernel that keeps dying, or a failing cell, is reported as before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from semula.reporting import report


def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    return path


def execute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: list[Exception]) -> tuple[Any, int]:
    calls = 0

    async def fake_execute(self: NotebookClient, **_: Any) -> None:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)

    monkeypatch.setattr(NotebookClient, "async_execute", fake_execute)
    run = asyncio.run(report._execute(notebook(tmp_path), tmp_path, None, 10, asyncio.Semaphore(1)))
    return run, calls


def test_a_kernel_that_died_before_answering_is_started_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, calls = execute(tmp_path, monkeypatch, [RuntimeError(report.KERNEL_NOT_STARTED)])
    assert (run.error, calls) == (None, 2)


def test_a_kernel_that_keeps_dying_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failures: list[Exception] = [RuntimeError(report.KERNEL_NOT_STARTED)] * 5
    run, calls = execute(tmp_path, monkeypatch, failures)
    assert calls == report.KERNEL_START_ATTEMPTS and report.KERNEL_NOT_STARTED in run.error


def test_other_errors_are_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, calls = execute(tmp_path, monkeypatch, [RuntimeError("something else")])
    assert calls == 1 and run.error == "RuntimeError: something else"
