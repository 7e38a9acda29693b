"""`--store` on the store commands: a server URL is used directly, anything else is refused, and no
password reaches the output."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from semula.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_store_that_is_not_postgres_is_refused_without_its_password(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMULA_STORE", "")  # restored at the end: --store sets it in this process
    result = CliRunner().invoke(main, ["entries", "list", "--data-dir", str(tmp_path),
                                       "--store", "mysql://u:topsecret@h/db"])
    assert result.exit_code == 2 and "not a postgresql:// URL" in result.output
    assert "topsecret" not in result.output


def test_an_unreachable_server_is_named_with_the_password_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMULA_STORE", "")  # restored at the end: --store sets it in this process
    url = f"postgresql://postgres:topsecret@127.0.0.1:{_closed_port()}/x"
    result = CliRunner().invoke(main, ["review", "list", "--data-dir", str(tmp_path), "--store", url])
    assert result.exit_code == 1 and "unreachable" in result.output and "***" in result.output
    assert "topsecret" not in result.output


@pytest.mark.slow
def test_store_commands_use_the_server(tmp_path, monkeypatch, pg_url):
    monkeypatch.setenv("SEMULA_STORE", "")  # restored at the end: --store sets it in this process
    runner = CliRunner()
    set_ = runner.invoke(main, ["config", "set", "bypass_temperature", "0.7", "--project", "team",
                                "--data-dir", str(tmp_path), "--store", pg_url])
    assert set_.exit_code == 0, set_.output
    shown = runner.invoke(main, ["config", "show", "--project", "team", "--json", "--data-dir", str(tmp_path / "x"),
                                 "--store", pg_url])
    assert shown.exit_code == 0 and json.loads(shown.output)["bypass_temperature"] == 0.7
    assert not (tmp_path / "semula.duckdb").exists()


def test_embeddings_status_counts_the_servers_vectors(tmp_path, monkeypatch, pg_url):
    monkeypatch.setenv("SEMULA_STORE", "")
    monkeypatch.setenv("SEMULA_EMBEDDINGS_OFFLINE", "1")
    result = CliRunner().invoke(main, ["embeddings", "status", "--data-dir", str(tmp_path), "--store", pg_url])
    assert result.exit_code == 0, result.output
    assert "entries:    0" in result.output and "vectors:    none" in result.output
