"""Which recordings a suite still uses, and which are too old: `semula recordings unused` and `stale`.

Unused across shards: each CI shard (or run) has its own data dir, so its own entry ids. A
recording is named across them by its file in the folder, which each data dir's manifest maps to
that dir's entry id; a recording is unused only when no shard's calls used its file.

Stale: a recording file's `recorded_at` against a `max_age` (given, or the project's setting in
`<project>/_settings.json`), by `core.expiry`. The files are read as the loader reads them, but
only their envelope matters here, so a bad file is named and skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from semula.core.expiry import age_seconds, describe_age, parse_duration
from semula.core.settings import PROJECT_NAME
from semula.recordings.files import max_file_bytes, read_capped, read_inside, scan
from semula.recordings.format import RecordingFileError, parse
from semula.recordings.shared import SETTINGS_FILE
from semula.store.types import one_row

MANIFEST_FILE = "recordings-manifest.json"  # recordings.folder.MANIFEST_FILE (not imported: folder imports more)


@dataclass(frozen=True)
class Shard:
    """One run's evidence: the entry ids its calls used (its Realtime conversations' too), and its manifest
    (file → entry id)."""

    name: str
    used_ids: frozenset[int]
    files: dict[str, int]
    calls: int


def manifest_files(data_dir: Path) -> dict[str, int]:
    """A data dir's manifest: each recording file (relative to the folder) and its entry id there."""
    try:
        data = json.loads((data_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {rel: info["entry_id"] for rel, info in files.items()
            if isinstance(rel, str) and isinstance(info, dict) and isinstance(info.get("entry_id"), int)}


def shard_of(path: Path, runs: tuple[str, ...] = ()) -> Shard:
    """A shard from a data dir (or its `calls` dir): the calls of `runs`, else of its last run.

    Raises ValueError naming what is missing."""
    import duckdb

    from semula.calllog.reader import load_log
    from semula.calllog.schema import CALL_LOG_SCHEMA

    data_dir = path.parent if path.name == "calls" else path
    con = duckdb.connect()
    if not load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA):
        raise ValueError(f"no call log in {data_dir / 'calls'}: run the tests through semula first")
    if not runs:
        last = con.execute("SELECT run_id FROM calls WHERE run_id IS NOT NULL GROUP BY run_id "
                           "ORDER BY max(ts) DESC LIMIT 1").fetchone()
        if last is None:
            raise ValueError(f"the call log in {data_dir / 'calls'} has no run ids yet: run the tests once more")
        runs = (last[0],)
    marks = ", ".join("?" * len(runs))
    count = one_row(con.execute(f"SELECT count(*) FROM calls WHERE run_id IN ({marks})", list(runs)).fetchone())[0]
    if not count:
        raise ValueError(f"no calls of run(s) {', '.join(runs)} in {data_dir / 'calls'}")
    sql = f"SELECT DISTINCT entry_id FROM calls WHERE run_id IN ({marks}) AND entry_id IS NOT NULL"
    used = {row[0] for row in con.execute(sql, list(runs)).fetchall()}
    return Shard(f"{data_dir} run {', '.join(runs)}", frozenset(used), manifest_files(data_dir), count)


def recording_files(root: Path) -> list[str]:
    """Every recording file of the folder (relative paths), loadable or not."""
    return [found.rel for found in scan(root)] if root.is_dir() else []


def unused_files(files: list[str], here: dict[str, int], shards: list[Shard]) -> list[tuple[int | None, str]]:
    """(entry id in this data dir or None, file) of the recording `files` no shard used. `here`: this
    data dir's manifest; a shard without a manifest is matched by entry id against it (right only when
    the shard is this data dir)."""
    used: set[str] = set()
    for shard in shards:
        by_id = shard.files or here
        used |= {rel for rel, entry_id in by_id.items() if entry_id in shard.used_ids}
    return [(here.get(rel), rel) for rel in sorted(set(files) | set(here)) if rel not in used]


# ---------------------------------------------------------------- stale


def _project_max_age(root: Path, project: str, cache: dict[str, str | None]) -> str | None:
    if project not in cache:
        cache[project] = None
        try:
            data = json.loads(read_inside(root, root / project / SETTINGS_FILE, 1 << 20).decode("utf-8"))
            value = data["settings"].get("max_age") if isinstance(data, dict) else None
            if isinstance(value, str):
                parse_duration(value)
                cache[project] = value
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    return cache[project]


def stale(root: Path, now: datetime, max_age: str | None = None, project: str | None = None
          ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(the expired recordings, oldest first, [(file, why it was not read)]). `max_age` None: each
    project's own setting (a project without one never expires)."""
    rows, bad, settings = [], [], {}  # type: ignore[var-annotated]
    for found in scan(root):
        try:
            if found.problem is not None:
                raise RecordingFileError(found.problem)
            data = parse(read_capped(found.path, max_file_bytes()).decode("utf-8"))
            if not isinstance(data, dict):
                raise RecordingFileError("not a JSON object")
        except (OSError, ValueError) as e:
            bad.append((found.rel, str(e)))
            continue
        name = data.get("project")
        if not isinstance(name, str) or not PROJECT_NAME.match(name) or (project is not None and name != project):
            continue
        limit = max_age or _project_max_age(root, name, settings)
        age = age_seconds(data.get("recorded_at"), now)
        if limit is None or age is None or age <= parse_duration(limit):
            continue
        provenance = _mapping(data.get("provenance"))
        rows.append({"file": found.rel, "project": name, "age": describe_age(age), "age_seconds": round(age),
                     "recorded_at": data.get("recorded_at"), "max_age": limit,
                     "sdk": provenance.get("user_agent"),
                     "model": provenance.get("answered_model") or data.get("model")})
    return sorted(rows, key=lambda r: -r["age_seconds"]), bad


AGE_BUCKETS = ((7 * 86400, "under 7 days"), (30 * 86400, "7-30 days"), (90 * 86400, "30-90 days"),
               (float("inf"), "over 90 days"))


def provenance_summary(root: Path, now: datetime) -> dict[str, Any]:
    """For `semula report`: how old the folder's recordings are, and which SDKs (user-agents) made them."""
    ages = {label: 0 for _, label in AGE_BUCKETS} | {"unknown": 0}
    sdks: dict[str, dict[str, Any]] = {}
    total = 0
    for found in scan(root) if root.is_dir() else ():
        try:
            data = parse(read_capped(found.path, max_file_bytes()).decode("utf-8")) if found.problem is None else None
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            continue
        total += 1
        age = age_seconds(data.get("recorded_at"), now)
        label = "unknown" if age is None else next(name for limit, name in AGE_BUCKETS if age < limit)
        ages[label] += 1
        provenance = _mapping(data.get("provenance"))
        sdk = str(provenance.get("user_agent") or "unknown")[:120]
        row = sdks.setdefault(sdk, {"sdk": sdk, "recordings": 0, "oldest": None})
        row["recordings"] += 1
        if age is not None and (row["oldest"] is None or age > row["oldest"]):
            row["oldest"] = age
    by_sdk = sorted(sdks.values(), key=lambda r: -r["recordings"])
    for row in by_sdk:
        row["oldest"] = describe_age(row["oldest"]) if row["oldest"] is not None else "unknown"
    return {"folder": str(root), "recordings": total, "ages": [[k, v] for k, v in ages.items() if v], "sdks": by_sdk}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
