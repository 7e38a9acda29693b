"""What `--help` and `semula stats` tell a newcomer: subcommands with descriptions, the settings,
the semula_* options, and one hit-rate definition."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from semula.cli import main
from semula.core.settings import SETTING_HELP, SETTING_KEYS
from semula.proxy.run.options import declared
from semula.calllog.reader import hit_rates
from semula.calllog.schema import CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION
from semula.calllog.writer import ParquetLog


def help_of(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(("group", "subcommands"), [
    ("entries", ["list", "show", "delete"]),
    ("review", ["list", "show", "approve", "reject"]),
    ("config", ["show", "set"]),
])
def test_groups_list_their_subcommands_with_descriptions(group: str, subcommands: list[str]) -> None:
    text = help_of(group)
    for name in subcommands:
        line = next((line for line in text.splitlines() if line.strip().startswith(name + " ")), "")
        assert len(line.split()) > 2, f"{group} {name} has no description in:\n{text}"


def test_config_set_help_lists_every_setting_with_its_description() -> None:
    text = help_of("config", "set")
    for key in SETTING_KEYS:
        assert key in text and SETTING_HELP[key][:30] in text, key


def test_proxy_help_lists_every_semula_option_from_its_declaration() -> None:
    text = " ".join(help_of("proxy").split())
    options = declared()
    assert len(options) >= 10 and all(o.name.startswith("semula_") for o in options)
    for option in options:
        assert option.name in text and " ".join(option.help.split())[:30] in text, option.name
    assert "--set semula_" in text


def test_review_approve_needs_an_id_or_both_fingerprints(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["review", "approve", "--request", "fp2:x", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "both --request and --recording" in result.output


# --- one hit rate ---------------------------------------------------------------------------------

CALLS = [  # (mode, decision): 3 hits of 5 lookups; bypass, passthrough and record are not lookups
    ("auto", "hit"), ("auto", "miss"), ("auto", "bypass"), ("auto", "passthrough"), ("record", "miss"),
    ("replay", "hit"), ("replay", "hit"), ("replay", "error"),
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    log = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION)
    start = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
    for n, (mode, decision) in enumerate(CALLS):
        log.append({"project": "p", "mode": mode, "decision": decision, "tier": "exact" if decision == "hit" else "none",
                    "ts": start + timedelta(seconds=n)})
    log.close()
    return tmp_path


def test_stats_hit_rate_leaves_bypasses_out_and_is_shown_per_mode(data_dir: Path) -> None:
    result = CliRunner().invoke(main, ["stats", "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert (stats["calls"], stats["lookups"], stats["hits"]) == (8, 5, 3) and stats["hit_rate"] == pytest.approx(0.6)
    by_mode = {r["mode"]: (r["lookups"], r["hits"]) for r in stats["by_mode"]}
    assert by_mode == {"auto": (2, 1), "record": (0, 0), "replay": (3, 2)}
    text = CliRunner().invoke(main, ["stats", "--data-dir", str(data_dir)], terminal_width=200).output
    assert "hit rate 60.0% (3 hits of 5 lookups" in text and "replay" in text


def test_the_notebooks_loader_gives_the_same_hit_rate(data_dir: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    from semula_logs import HIT_RATE_COLUMNS, open_logs

    logs = open_logs(data_dir)
    (row,) = logs.con.execute(f"SELECT {HIT_RATE_COLUMNS} FROM calls").fetchall()
    assert row == (8, 5, 3, 0.6)
    assert hit_rates(logs.con, by=None)[0]["hit_rate"] == pytest.approx(0.6)
    assert logs.bin.label == "second", "eight calls over seven seconds: one-second bins, not days"


def test_hit_rates_without_lookups_is_none() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE calls AS SELECT 'auto' AS mode, 'bypass' AS decision, 'p' AS project")
    assert hit_rates(con) == [{"mode": "auto", "calls": 1, "lookups": 0, "hits": 0, "hit_rate": None}]


@pytest.mark.parametrize(("span_seconds", "label"), [
    (0, "second"), (45, "second"), (300, "10 seconds"), (3000, "minute"), (4 * 3600, "10 minutes"),
    (2 * 86400, "hour"), (40 * 86400, "day"), (300 * 86400, "week"), (5 * 365 * 86400, "30 days"),
])
def test_the_time_bin_follows_the_span(span_seconds: float, label: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    from semula_logs import choose_bin

    assert choose_bin(span_seconds).label == label


def test_mitmweb_shows_the_comment_column() -> None:
    from semula.cli.proxy_cmd import mitmproxy_args

    args = mitmproxy_args("auto", "127.0.0.1", 8080, Path(".semula"), "default", (), web=True)
    assert "web_columns=comment" in args and "web_columns=comment" not in mitmproxy_args(
        "auto", "127.0.0.1", 8080, Path(".semula"), "default", (), web=False)


def test_the_hit_rate_line_joins_neighbouring_bins_only() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    from semula_logs import consecutive_runs

    start = datetime(2026, 1, 1, tzinfo=UTC)
    minute = [start + timedelta(minutes=n) for n in (0, 1, 2, 7, 9, 10)]
    runs = consecutive_runs([(t, 0.5) for t in minute], 60)
    assert [[t for t, _ in run] for run in runs] == [minute[:3], minute[3:4], minute[4:]]
    assert consecutive_runs([], 60) == []
