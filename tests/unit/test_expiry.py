"""core.expiry and core.provenance (pure), the max_age settings, and recordings.usage (stale, unused across shards)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from entries import chat, new_entry
from semula.core.expiry import age_seconds, parse_duration, verdict
from semula.core.modes import Mode
from semula.core.provenance import answered_model, provenance_of
from semula.core.settings import SettingsError, parse_setting
from semula.recordings.usage import Shard, stale, unused_files

NOW = datetime(2026, 12, 2, 12, 0, 0)
DAY = 86400.0


@pytest.mark.parametrize(("text", "seconds"), [("30d", 30 * DAY), ("12h", 43200), ("90m", 5400), ("2w", 14 * DAY),
                                               ("45s", 45), ("7", 7 * DAY), (" 1.5d ", 1.5 * DAY)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "-1d", "0d", "30y", "1e9"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("age", "max_age", "policy", "mode", "action"), [
    (None, "30d", "fail", Mode.REPLAY, "serve"),  # no recorded_at: never expires
    (10 * DAY, None, "fail", Mode.REPLAY, "serve"),
    (10 * DAY, "30d", "fail", Mode.REPLAY, "serve"),
    (40 * DAY, "30d", "warn", Mode.REPLAY, "warn"),
    (40 * DAY, "30d", "fail", Mode.REPLAY, "refuse"),
    (40 * DAY, "30d", "fail", Mode.AUTO, "warn"),
    (40 * DAY, "30d", "re-record", Mode.AUTO, "re-record"),
    (40 * DAY, "30d", "re-record", Mode.RECORD, "re-record"),
    (40 * DAY, "30d", "re-record", Mode.REPLAY, "warn"),  # replay never reaches the network
])
def test_the_verdict(age: float | None, max_age: str | None, policy: str, mode: Mode, action: str) -> None:
    found = verdict(age, max_age, policy, mode)
    assert found.action == action
    if action != "serve":
        assert found.reason.startswith("recording older than max_age 30d (recorded 40d ago)")


def test_ages_read_any_iso_time() -> None:
    assert age_seconds("2026-12-01T12:00:00", NOW) == DAY
    assert age_seconds("2026-12-01T12:00:00+00:00", NOW) == DAY
    assert age_seconds("2026-12-01T13:00:00+01:00", NOW) == DAY
    assert age_seconds("yesterday", NOW) is None and age_seconds(None, NOW) is None


def test_settings() -> None:
    assert parse_setting("max_age", "30d") == "30d" and parse_setting("max_age", "null") is None
    assert parse_setting("max_age_policy", "re-record") == "re-record"
    with pytest.raises(SettingsError, match="not a duration"):
        parse_setting("max_age", "soon")
    with pytest.raises(SettingsError, match="warn, fail, re-record"):
        parse_setting("max_age_policy", "refresh")


@pytest.mark.parametrize(("body", "streamed", "model"), [
    (b'{"id":"x","model":"gpt-4o-2024-08-06","choices":[]}', False, "gpt-4o-2024-08-06"),
    (b'data: {"type":"message_start","message":{"model":"claude-3-5-sonnet-20241022"}}\n\n', True,
     "claude-3-5-sonnet-20241022"),
    (b'data: {"type":"response.created","response":{"model":"gpt-4.1"}}\n\ndata: [DONE]\n\n', True, "gpt-4.1"),
    (b'{"candidates":[],"modelVersion":"gemini-2.0-flash"}', False, "gemini-2.0-flash"),
    (b'[{"candidates":[],"modelVersion":"gemini-2.0-flash"}]', False, "gemini-2.0-flash"),
    (b"ID3\x00binary", False, None),
])
def test_the_answered_model(body: bytes, streamed: bool, model: str | None) -> None:
    assert answered_model(body, streamed) == model


def test_provenance_redacts_the_user_agent() -> None:
    key = "sk-proj-" + "A" * 40
    out = provenance_of(f"OpenAI/Python 1.99.0 {key}\r\nX: y", b'{"model":"m"}', False, "0.1.0")
    assert key not in json.dumps(out) and out["user_agent"].startswith("OpenAI/Python 1.99.0")
    assert "\n" not in out["user_agent"] and out["answered_model"] == "m" and out["semula"] == "0.1.0"
    assert provenance_of(None, b"", False, "0.1.0") == {"semula": "0.1.0"}


def test_unused_only_when_no_shard_used_it() -> None:
    files = ["a.json", "b.json", "c.json", "d.json"]
    here = {"a.json": 1, "b.json": 2, "c.json": 3}
    shard1 = Shard("one", frozenset({10}), {"a.json": 10, "b.json": 11, "c.json": 12}, 1)
    shard2 = Shard("two", frozenset({7}), {"a.json": 5, "b.json": 6, "c.json": 7}, 1)
    assert unused_files(files, here, [shard1]) == [(2, "b.json"), (3, "c.json"), (None, "d.json")]
    assert unused_files(files, here, [shard1, shard2]) == [(2, "b.json"), (None, "d.json")]
    no_manifest = Shard("local", frozenset({2}), {}, 1)  # matched by this data dir's ids
    assert unused_files(files, here, [shard1, shard2, no_manifest]) == [(None, "d.json")]


def _file(root: Path, rel: str, project: str, recorded_at: str | None, **extra: object) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "semula-recording/1", "project": project, "recorded_at": recorded_at,
                                "model": "gpt-4o", **extra}))


def test_stale_lists_old_recordings_by_max_age_or_the_projects_setting(tmp_path: Path) -> None:
    _file(tmp_path, "p/openai/x/old.json", "p", "2026-10-01T00:00:00",
          provenance={"user_agent": "OpenAI/Python 1.2.3", "answered_model": "gpt-4o-2024"})
    _file(tmp_path, "p/openai/x/new.json", "p", "2026-12-01T00:00:00")
    _file(tmp_path, "q/openai/x/old.json", "q", "2026-01-01T00:00:00")
    _file(tmp_path, "q/openai/x/unknown.json", "q", None)
    (tmp_path / "p" / "_settings.json").write_text(json.dumps(
        {"format": "semula-settings/1", "project": "p", "settings": {"max_age": "30d"}}))
    rows, bad = stale(tmp_path, NOW)
    assert [r["file"] for r in rows] == ["p/openai/x/old.json"] and not bad  # q has no max_age
    assert rows[0]["sdk"] == "OpenAI/Python 1.2.3" and rows[0]["model"] == "gpt-4o-2024" and rows[0]["age"] == "62d"
    rows, _ = stale(tmp_path, NOW, max_age="3d")
    assert [r["file"] for r in rows] == ["q/openai/x/old.json", "p/openai/x/old.json"]
    rows, _ = stale(tmp_path, NOW, max_age="3d", project="q")
    assert [r["file"] for r in rows] == ["q/openai/x/old.json"]


def test_the_store_keeps_provenance(engine) -> None:  # noqa: ANN001 - both backends (conftest `engine`)
    provenance = {"user_agent": "OpenAI/Python 1.99.0", "answered_model": "gpt-4o-2024-08-06", "semula": "0.1.0"}
    with_it = engine.store.upsert_entry(new_entry(chat("with provenance"), provenance=provenance))
    without = engine.store.upsert_entry(new_entry(chat("without")))
    (bulk,) = engine.store.upsert_entries([new_entry(chat("bulk"), provenance={"semula": "0.1.0"})])
    assert engine.store.get_entry(with_it).provenance == provenance
    assert engine.store.get_entry(without).provenance is None
    assert engine.store.get_entry(bulk).provenance == {"semula": "0.1.0"}


def test_the_report_shows_the_recordings_ages_and_sdks(tmp_path: Path) -> None:
    from semula.recordings.usage import provenance_summary
    from semula.reporting.report import render_html

    _file(tmp_path, "p/openai/x/old.json", "p", "2026-10-01T00:00:00", provenance={"user_agent": "OpenAI/Python 1.2.3"})
    _file(tmp_path, "p/openai/x/new.json", "p", "2026-12-01T00:00:00", provenance={"user_agent": "<b>ua</b>"})
    summary = provenance_summary(tmp_path, NOW)
    assert summary["recordings"] == 2 and summary["ages"] == [["under 7 days", 1], ["30-90 days", 1]]
    page = render_html([], tmp_path, summary)
    assert "Recordings: ages and SDKs" in page and "OpenAI/Python 1.2.3" in page and "62d" in page
    assert "&lt;b&gt;ua&lt;/b&gt;" in page and "<b>ua" not in page
