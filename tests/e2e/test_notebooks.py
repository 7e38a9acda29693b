"""The analysis notebooks compute the right numbers from the Parquet logs.

Every notebook is executed once (module-scoped fixture) on a generated demo log
that includes a file from the previous schema_version; the key numbers each prints
on its `SEMULA_RESULTS` line are checked against independent computations —
direct DuckDB queries or plain Python over the same files, never the notebooks'
own helper.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from semula.calllog.schema import CALL_LOG_SCHEMA_VERSION
import pytest

pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")

from semula.reporting.report import NOTEBOOKS, NotebookRun, analysis_dir, execute_notebooks  # noqa: E402

from shared_paths import REPO, import_path  # noqa: E402


demo = import_path("make_demo_calls", REPO / "scripts" / "make_demo_calls.py")
semula_logs = import_path("semula_logs", REPO / "analysis" / "semula_logs.py")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("semula-data")
    demo.generate(path, days=14, seed=11, end=date(2025, 3, 31))
    return path


@pytest.fixture(scope="module")
def runs(data_dir: Path) -> dict[str, NotebookRun]:
    executed = execute_notebooks([analysis_dir() / name for name, _ in NOTEBOOKS], data_dir)
    return {run.filename: run for run in executed}


@pytest.fixture(scope="module")
def con(data_dir: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    for name in ("calls", "reviews"):
        glob = str(data_dir / name / "**" / "*.parquet")
        connection.execute(
            f"CREATE VIEW raw_{name} AS SELECT * FROM read_parquet('{glob}', hive_partitioning=true, union_by_name=true)"
        )
    return connection


def results(runs: dict[str, NotebookRun], filename: str) -> dict[str, Any]:
    run = runs[filename]
    assert run.error is None, f"{filename} failed: {run.error}"
    assert run.results is not None, f"{filename} printed no SEMULA_RESULTS line"
    return run.results


def test_demo_log_has_a_previous_schema_file(data_dir: Path) -> None:
    versions = {}
    for path in (data_dir / "calls").glob("**/*.parquet"):
        schema = pq.read_schema(path)
        version = pq.read_table(path, columns=["schema_version"]).column(0)[0].as_py()
        versions[version] = schema
    assert set(versions) == {0, CALL_LOG_SCHEMA_VERSION}
    assert "candidate_tier" not in versions[0].names and "recorded" not in versions[0].names
    assert "candidate_tier" in versions[CALL_LOG_SCHEMA_VERSION].names


@pytest.mark.parametrize("filename", [name for name, _ in NOTEBOOKS])
def test_notebook_runs_cleanly(runs: dict[str, NotebookRun], filename: str) -> None:
    run = runs[filename]
    assert run.error is None
    errors = [o for c in run.notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    pngs = [o for c in run.notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert pngs, f"{filename} drew no plot"
    assert run.results is not None


def test_overview_hit_rate_and_tiers(runs: dict[str, NotebookRun], con: duckdb.DuckDBPyConnection) -> None:
    got = results(runs, "overview.ipynb")
    calls, hits, lookups, replay = con.execute(
        """
        SELECT count(*),
               count(*) FILTER (WHERE decision = 'hit'),
               count(*) FILTER (WHERE decision IN ('hit', 'miss', 'error') AND coalesce(mode, '') <> 'record'),
               count(*) FILTER (WHERE mode = 'replay' AND decision <> 'hit' AND decision <> 'passthrough'
                                  AND coalesce(status, 0) <> 204)
        FROM raw_calls"""
    ).fetchone()
    side_calls = con.execute("SELECT count(*) FROM raw_calls WHERE mode = 'replay' AND path = '/v1/traces/ingest'")
    assert side_calls.fetchone()[0] > 0, "the demo log should hold replay-mode side calls (answered 204 locally)"
    tiers = dict(con.execute("SELECT tier, count(*) FROM raw_calls WHERE decision = 'hit' GROUP BY tier").fetchall())
    assert got["calls"] == calls
    assert got["hits"] == hits and got["lookups"] == lookups
    assert got["hit_rate"] == pytest.approx(hits / lookups)
    assert got["hits_by_tier"] == tiers
    assert got["replay_failures"] == replay > 0
    assert sum(got["decisions"].values()) == calls


def test_savings_tokens_and_money(runs: dict[str, NotebookRun], con: duckdb.DuckDBPyConnection) -> None:
    got = results(runs, "savings.ipynb")
    rows = con.execute(
        """
        SELECT model, recorded_prompt_tokens, recorded_completion_tokens, recorded_upstream_ms, decision_ms
        FROM raw_calls WHERE decision = 'hit'"""
    ).fetchall()
    prices = got["prices"]
    assert prices, "the notebook's price table should not be empty"
    usd = sum(
        (p or 0) * prices[m][0] / 1e6 + (c or 0) * prices[m][1] / 1e6 for m, p, c, _, _ in rows if m in prices
    )
    assert got["hits"] == len(rows)
    assert got["tokens_saved_prompt"] == sum(p or 0 for _, p, _, _, _ in rows)
    assert got["tokens_saved_completion"] == sum(c or 0 for _, _, c, _, _ in rows)
    assert got["usd_saved"] == pytest.approx(usd, rel=1e-9)
    assert got["ms_saved"] == pytest.approx(sum(u - (d or 0) for _, _, _, u, d in rows if u is not None), rel=1e-9)
    assert got["unpriced_models"] == sorted({m for m, *_ in rows if m not in prices})


def test_review_open_and_verdicts(runs: dict[str, NotebookRun], con: duckdb.DuckDBPyConnection) -> None:
    got = results(runs, "review.ipynb")
    # epoch_us: fetching TIMESTAMPTZ into Python would need pytz
    events = con.execute("SELECT candidate_id, event, epoch_us(ts) AS ts FROM raw_reviews ORDER BY ts").fetchall()
    resolutions = defaultdict(list)
    for candidate, event, ts in events:
        if event != "queued":
            resolutions[candidate].append(ts)
    open_ = {
        candidate
        for candidate, event, ts in events
        if event == "queued" and not any(later > ts for later in resolutions[candidate])
    }
    final = {candidate: event for candidate, event, _ in events}  # sorted by ts: the last one wins
    counts = Counter(final.values())
    assert got["open"] == len(open_) > 0
    assert got["approved"] == counts["approved"] > 0
    assert got["rejected"] == counts["rejected"] > 0
    assert got["closed"] == counts["closed"]
    assert got["candidates"] == len(final)
    assert got["approval_rate"] == pytest.approx(counts["approved"] / (counts["approved"] + counts["rejected"]))


def test_threshold_sweep(runs: dict[str, NotebookRun], con: duckdb.DuckDBPyConnection) -> None:
    got = results(runs, "thresholds.ipynb")
    thresholds = got["thresholds"]
    assert thresholds[0] == pytest.approx(0.6) and thresholds[-1] == pytest.approx(1.0)

    verdict: dict[tuple[str, str, int], tuple[Any, str]] = {}
    for project, fp, entry, event, ts in con.execute(
        "SELECT project, request_fp, entry_id, event, epoch_us(ts) FROM raw_reviews WHERE event IN ('approved', 'rejected')"
    ).fetchall():
        if (project, fp, entry) not in verdict or ts > verdict[(project, fp, entry)][0]:
            verdict[(project, fp, entry)] = (ts, event)

    near: list[tuple[str, str, float, bool, str | None]] = []
    columns = "project, decision, tier, score, request_fp, candidate_tier, candidate_score, candidate_entry_id, guard_reason"
    for row in con.execute(f"SELECT {columns} FROM raw_calls").fetchall():
        call = dict(zip([d[0] for d in con.description], row))
        if call["decision"] == "hit" and call["tier"] in ("lexical", "embedding") and call["score"] is not None:
            near.append((call["project"], call["tier"], call["score"], False, None))
        elif call["decision"] == "miss" and call["candidate_tier"] in ("lexical", "embedding"):
            if call["candidate_score"] is None:
                continue
            key = (call["project"], call["request_fp"], call["candidate_entry_id"])
            near.append(
                (
                    call["project"],
                    call["candidate_tier"],
                    call["candidate_score"],
                    call["guard_reason"] is not None,
                    verdict.get(key, (None, None))[1],
                )
            )

    expected = []
    for project, tier in sorted({(p, t) for p, t, *_ in near}):
        group = [n for n in near if n[0] == project and n[1] == tier]
        for t in thresholds:
            served = [n for n in group if not n[3] and n[2] >= t]
            held = [n for n in group if n[3] or n[2] < t]
            expected.append(
                {
                    "project": project,
                    "tier": tier,
                    "threshold": t,
                    "near": len(group),
                    "serve": len(served),
                    "review": len(held),
                    "guard_blocked": sum(n[3] for n in group),
                    "approved_served": sum(n[4] == "approved" for n in served),
                    "rejected_served": sum(n[4] == "rejected" for n in served),
                    "approved_held": sum(n[4] == "approved" for n in held),
                }
            )
    assert got["sweep"] == expected
    assert got["near_matches"] == len(near)
    assert any(row["rejected_served"] for row in expected), "demo data should exercise the verdict join"
    suggestions = got["suggestions"]
    assert suggestions, "the demo data has near matches to suggest thresholds for"
    for row in suggestions:  # a suggestion needs reviews behind it, or it says so
        assert isinstance(row["threshold"], float) == (row["reviewed"] >= 5), row
        if row["reviewed"] < 5:
            assert row["threshold"].startswith("not enough data"), row


def test_logs_helper_fills_columns_an_old_schema_lacks(tmp_path: Path, data_dir: Path) -> None:
    # Only the schema_version 0 file: its missing columns must still exist, as NULLs.
    legacy = next(p for p in (data_dir / "calls").glob("**/*.parquet") if "candidate_tier" not in pq.read_schema(p).names)
    target = tmp_path / "calls" / legacy.parent.name
    target.mkdir(parents=True)
    (target / legacy.name).write_bytes(legacy.read_bytes())
    logs = semula_logs.open_logs(tmp_path)
    assert logs.have_calls and not logs.have_reviews
    row = logs.con.execute(
        "SELECT count(*), count(candidate_tier), count(recorded), min(schema_version), count(day) FROM calls"
    ).fetchone()
    assert row == (logs.calls, 0, 0, 0, logs.calls)


def test_logs_helper_on_a_missing_dir(tmp_path: Path) -> None:
    logs = semula_logs.open_logs(tmp_path / "nowhere")
    assert not logs.have_calls and not logs.have_reviews
    assert logs.con.execute("SELECT count(*) FROM calls").fetchone() == (0,)
    assert "no calls logged yet in" in logs.summary()
    assert "make_demo_calls.py" in logs.summary()


def test_calibration_curve(runs: dict[str, NotebookRun], con: duckdb.DuckDBPyConnection) -> None:
    """The curve per project, tier and stratum from the latest verdict of each pair that calibration counts."""
    from semula.core.calibration import LabelledVerdict, curve

    got = results(runs, "thresholds.ipynb")["calibration_curve"]
    latest: dict[tuple[str, str, int], tuple[Any, ...]] = {}
    for project, fp, entry, event, ts, tier, score, stratum, calibrates in con.execute(
        "SELECT project, request_fp, entry_id, event, epoch_us(ts), tier, score, stratum, calibrates FROM raw_reviews "
        "WHERE event IN ('approved', 'rejected')"
    ).fetchall():
        if (project, fp, entry) not in latest or ts > latest[(project, fp, entry)][0]:
            latest[(project, fp, entry)] = (ts, event, tier, score, stratum, calibrates)
    by_project: dict[str, list[LabelledVerdict]] = defaultdict(list)
    for (project, _, _), (_, event, tier, score, stratum, calibrates) in latest.items():
        if calibrates and stratum is not None:
            by_project[project].append(LabelledVerdict(tier, score, event == "approved", stratum))
    expected = {(project, tier, stratum): [vars(point) for point in points]
                for project, verdicts in by_project.items() for (tier, stratum), points in curve(verdicts).items()}
    assert {(c["project"], c["tier"], c["stratum"]): c["points"] for c in got} == expected
    assert len({c["stratum"] for c in got}) > 1, "the demo data has verdicts in several strata"
