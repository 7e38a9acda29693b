"""Replay from a read-only data dir (reliability item 8).

A mounted CI cache or a read-only checkout used to refuse every request: the store could not
be opened for writing. The store now opens read-only (`semula_read_only=true`, or a data dir /
store file that is not writable), hits are served, and the call log goes to a temporary
directory the ready line names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import openai_client, read_call_log, run_semula, uniq

pytestmark = pytest.mark.e2e


def _ask(proxy, text: str) -> str:  # type: ignore[no-untyped-def]
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).choices[0].message.content


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def _replay_read_only(proxy_factory: ProxyFactory, data_dir: Path, prompts: list[str], answers: list[str],
                      extra_args: tuple[str, ...]) -> None:
    store = data_dir / "semula.duckdb"
    before = _fingerprint(store)
    listing = sorted(p.name for p in data_dir.iterdir())
    replay = proxy_factory("replay", data_dir, upstream="gone", extra_args=extra_args)
    assert [_ask(replay, p) for p in prompts] == answers, replay.describe()
    replay.stop()
    assert _fingerprint(store) == before, "the read-only store file was changed"
    assert sorted(p.name for p in data_dir.iterdir()) == listing, "the read-only data dir was written"
    ready = next(line for line in replay.output().splitlines() if line.startswith("semula ready:"))
    found = re.search(r"call log and review log in (\S+)", ready)
    assert found, ready
    rows = read_call_log(Path(found.group(1)))
    assert [r["decision"] for r in rows] == ["hit"] * len(prompts), rows


def _record(proxy_factory: ProxyFactory, name: str) -> tuple[Path, list[str], list[str]]:
    record = proxy_factory("auto")
    run = uniq(name)
    prompts = [f"read-only replay one {run}", f"read-only replay two {run}"]
    answers = [_ask(record, p) for p in prompts]
    record.stop()
    return record.data_dir, prompts, answers


def test_replay_with_the_read_only_option_serves_hits_and_writes_nothing(proxy_factory: ProxyFactory) -> None:
    data_dir, prompts, answers = _record(proxy_factory, "ro-option")
    _replay_read_only(proxy_factory, data_dir, prompts, answers, ("--set", "semula_read_only=true"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod")
def test_replay_from_a_read_only_data_dir_serves_hits(proxy_factory: ProxyFactory) -> None:
    data_dir, prompts, answers = _record(proxy_factory, "ro-chmod")
    store = data_dir / "semula.duckdb"
    store.chmod(0o400)
    data_dir.chmod(0o500)
    try:
        _replay_read_only(proxy_factory, data_dir, prompts, answers, ())
    finally:
        data_dir.chmod(0o700)
        store.chmod(0o600)


def test_the_cli_reaches_a_read_only_proxy_through_its_fallback_admin_file(proxy_factory: ProxyFactory) -> None:
    """The admin.json of a proxy that cannot write its data dir lives in a per-user fallback dir the
    CLI knows; without it the CLI opens the store itself and DuckDB refuses (the proxy holds it)."""
    from semula.admin.protocol import ADMIN_FILE, fallback_admin_dir

    data_dir, prompts, _ = _record(proxy_factory, "ro-cli")
    replay = proxy_factory("replay", data_dir, upstream="gone", extra_args=("--set", "semula_read_only=true"))
    fallback = fallback_admin_dir(data_dir) / ADMIN_FILE
    assert fallback.is_file() and not (data_dir / ADMIN_FILE).exists()
    assert stat.S_IMODE(fallback.stat().st_mode) == 0o600
    assert stat.S_IMODE(fallback.parent.stat().st_mode) == 0o700
    listed = run_semula("entries", "list", "--data-dir", str(data_dir), "--json")
    replay.stop()
    assert listed.returncode == 0, (listed.stderr, replay.output()[-2000:])
    assert sorted(row["last_text"] for row in json.loads(listed.stdout)) == sorted(prompts)
    assert not fallback.exists(), "the stopped proxy left its admin file behind"
