"""Shared loading and display helpers for the analysis notebooks.

Why a module: every notebook must read the Parquet logs the same forgiving way —
files from an older schema_version lack columns, a fresh install has no files at
all — and getting that wrong four times is easy. `open_logs` gives each notebook
two in-memory DuckDB tables, `calls` and `reviews`, that always have every column of the
current schema (a column no file has yet is a typed NULL), plus a `day` column.
`ts` is a naive timestamp in UTC, `day` its UTC date, and `bin` the start of its time bin
(`Logs.bin`, chosen from the logs' span). The hit rate's one definition is `HIT_RATE_COLUMNS`.

It reads only the Parquet logs, never the proxy's live semula.duckdb store, which
the running proxy holds open.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from semula.calllog.reader import ANSWERED_LOCALLY, HIT_RATE_COLUMNS, load_log
from semula.calllog.schema import CALL_LOG_SCHEMA, REVIEW_LOG_SCHEMA

__all__ = ["ANSWERED_LOCALLY", "HIT_RATE_COLUMNS", "Logs", "Table", "data_dir_from_env", "emit_results", "open_logs", "query",
           "setup_plots", "show", "time_axis"]

DEFAULT_DATA_DIR = "../.semula"  # relative to analysis/, i.e. the repo's .semula
RESULTS_PREFIX = "SEMULA_RESULTS "


@dataclass(frozen=True)
class Logs:
    """An in-memory DuckDB connection with `calls` and `reviews` tables, and what they hold."""

    con: duckdb.DuckDBPyConnection
    data_dir: Path
    calls: int
    reviews: int
    bin: TimeBin

    @property
    def have_calls(self) -> bool:
        return self.calls > 0

    @property
    def have_reviews(self) -> bool:
        return self.reviews > 0

    def no_calls_message(self) -> str:
        return (
            f"no calls logged yet in {self.data_dir} — run some traffic through semula "
            "or scripts/make_demo_calls.py"
        )

    def no_reviews_message(self) -> str:
        return (
            f"no review events logged yet in {self.data_dir} — near misses are queued for review "
            "once semula sees traffic (or run scripts/make_demo_calls.py)"
        )

    def summary(self) -> str:
        """One line saying what was loaded, so a reader knows which logs a number comes from."""
        if not self.have_calls:
            return self.no_calls_message()
        first, last, versions = self.con.execute(
            "SELECT min(day), max(day), string_agg(DISTINCT coalesce(CAST(schema_version AS VARCHAR), '?'), ', ' "
            "ORDER BY coalesce(CAST(schema_version AS VARCHAR), '?')) FROM calls"
        ).fetchone()
        return (
            f"{self.calls:,} calls from {first} to {last} and {self.reviews:,} review events "
            f"in {self.data_dir} (call-log schema versions: {versions})"
        )


@dataclass(frozen=True)
class TimeBin:
    """The width of the time axis' bins, chosen from the logs' span: a few minutes of calls get
    seconds or minutes, a year of them weeks. Both tables get a `bin` column (the bin's start)."""

    seconds: int
    label: str  # "10 seconds", "hour", …

    @property
    def days(self) -> float:
        """The bin's width in matplotlib's date units (days): bars as wide as their bin."""
        return self.seconds / 86400


# (seconds, label), narrowest first: the first that keeps the axis at most MAX_BINS bins wide.
BINS = ((1, "second"), (10, "10 seconds"), (60, "minute"), (600, "10 minutes"), (3600, "hour"),
        (6 * 3600, "6 hours"), (86400, "day"), (7 * 86400, "week"), (30 * 86400, "30 days"))
MAX_BINS = 60


def consecutive_runs(points: list[tuple[Any, Any]], seconds: int) -> list[list[tuple[Any, Any]]]:
    """(bin start, value) points, in order, split where bins with no value lie between: a chart's line
    then joins neighbouring bins only, and a quiet stretch shows as a gap instead of a slope."""
    runs: list[list[tuple[Any, Any]]] = []
    for point in points:
        if runs and (point[0] - runs[-1][-1][0]).total_seconds() <= seconds:
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


def choose_bin(span_seconds: float) -> TimeBin:
    """The narrowest bin that shows `span_seconds` in at most MAX_BINS bins."""
    for seconds, label in BINS:
        if span_seconds / seconds <= MAX_BINS:
            return TimeBin(seconds, label)
    return TimeBin(*BINS[-1])


def _add_bins(con: duckdb.DuckDBPyConnection) -> TimeBin:
    first, last = con.execute(
        "SELECT min(ts), max(ts) FROM (SELECT ts FROM calls UNION ALL SELECT ts FROM reviews)").fetchone()
    chosen = choose_bin((last - first).total_seconds() if first is not None else 0)
    for table in ("calls", "reviews"):
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT *, "
                    f"time_bucket(INTERVAL '{chosen.seconds} seconds', ts) AS bin FROM {table}")
    return chosen


def time_axis(ax: Any) -> None:
    """Dates on the x axis as short as they can be read ("14:05", "Mar 3"), whatever the bin."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def data_dir_from_env(default: str | os.PathLike[str] = DEFAULT_DATA_DIR) -> Path:
    """SEMULA_DATA_DIR wins so `semula report` can point the notebooks at any data dir."""
    return Path(os.environ.get("SEMULA_DATA_DIR") or default)


def open_logs(data_dir: str | os.PathLike[str]) -> Logs:
    """Load both logs; an empty or missing log gives empty tables, not an error."""
    data_dir = Path(data_dir).expanduser()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # days are UTC days, like the date= partitions
    calls = load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA)
    reviews = load_log(con, "reviews", data_dir / "reviews", REVIEW_LOG_SCHEMA)
    return Logs(con, data_dir, calls, reviews, _add_bins(con))


def setup_plots() -> None:
    """Small figures keep the report light and notebook execution quick."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.figsize": (7.5, 3.0),
            "figure.dpi": 80,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "legend.fontsize": "small",
            "legend.frameon": False,
        }
    )


def _format(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


class Table:
    """A query result that renders as an HTML table in Jupyter and in the report.

    DuckDB's own repr is text only and pandas is not a dependency, so this small
    renderer keeps tables readable without one.
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = 40) -> None:
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.limit = limit

    def _shown(self) -> tuple[list[list[Any]], int]:
        return self.rows[: self.limit], max(0, len(self.rows) - self.limit)

    def _repr_html_(self) -> str:
        shown, hidden = self._shown()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="{"num" if isinstance(v, (int, float)) and not isinstance(v, bool) else "txt"}">'
                f"{html.escape(_format(v))}</td>"
                for v in row
            )
            + "</tr>"
            for row in shown
        )
        more = f'<p class="more">… {hidden:,} more rows</p>' if hidden else ""
        if not self.rows:
            body = f'<tr><td colspan="{len(self.columns)}">(no rows)</td></tr>'
        return f'<table class="semula"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'

    def __repr__(self) -> str:
        shown, hidden = self._shown()
        cells = [self.columns] + [[_format(v) for v in row] for row in shown]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if hidden:
            lines.append(f"… {hidden:,} more rows")
        return "\n".join(lines)


def query(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Run `sql` and return rows as dicts, the shape the plots and results want."""
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def show(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None, limit: int = 40) -> Table:
    """Run `sql` and return a displayable table (put it last in a cell, or `display()` it)."""
    cursor = con.execute(sql, params or [])
    return Table([d[0] for d in cursor.description], cursor.fetchall(), limit)


def emit_results(results: dict[str, Any]) -> None:
    """Print the notebook's key numbers as one JSON line that tests and the report parse."""
    print(RESULTS_PREFIX + json.dumps(results, sort_keys=True, default=str, ensure_ascii=False))
