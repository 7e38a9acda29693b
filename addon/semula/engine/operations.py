"""Store operations that the CLI runs — directly, or through a running proxy's admin endpoint.

One table of named operations, so both paths run the same code on an `Engine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from semula.engine.engine import Engine

Operation = Callable[[Engine, dict[str, Any]], Any]


def _entries_list(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.recordings.list_entries(p.get("project"), int(p.get("limit") or 100))


def _entries_show(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.recordings.show_entry(int(p["id"]))


def _entries_delete(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.recordings.delete_entry(int(p["id"]))


def _config_show(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.recordings.config_show(p.get("project") or "default")


def _config_set(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.recordings.config_set(p.get("project") or "default", p["key"], p["value"])


def _projects(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.projects()


def _memory(engine: Engine, p: dict[str, Any]) -> Any:
    """What the proxy holds, in counted bytes: the answer cache against its budget, the fingerprint index,
    the full-text postings, and the store's own memory (DuckDB; None for Postgres)."""
    return {"answer_cache_bytes": engine.answers.nbytes, "answer_cache_budget": engine.answers.max_bytes,
            "answer_cache_entries": len(engine.answers),
            "fingerprints": len(engine.index), "fingerprint_bytes": engine.index.nbytes(),
            "lexical_bytes": engine.lexical.nbytes(),
            "store_bytes": engine.store.memory_bytes()}


OPERATIONS: dict[str, Operation] = {
    "entries.list": _entries_list,
    "entries.show": _entries_show,
    "entries.delete": _entries_delete,
    "config.show": _config_show,
    "config.set": _config_set,
    "projects": _projects,
    "memory": _memory,
}


def run_operation(engine: Engine, method: str, params: dict[str, Any]) -> Any:
    operation = OPERATIONS.get(method)
    if operation is None:
        raise ValueError(f"unknown operation {method!r}; valid: {', '.join(sorted(OPERATIONS))}")
    return operation(engine, params)


def _review_list(engine: Engine, p: dict[str, Any]) -> Any:
    status = p.get("status", "open")
    return engine.review.list(p.get("project"), None if status == "all" else status)


def _review_show(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.review.show(int(p["id"]))


def _review_approve(engine: Engine, p: dict[str, Any]) -> Any:
    candidate_id = p.get("id")
    if candidate_id is None:
        candidate_id = engine.review.find_open(p.get("request") or "", p.get("recording") or "")
    return {**engine.approve(int(candidate_id)), "id": int(candidate_id)}


def _review_reject(engine: Engine, p: dict[str, Any]) -> Any:
    return engine.review.reject(int(p["id"]))


OPERATIONS.update({
    "review.list": _review_list,
    "review.show": _review_show,
    "review.approve": _review_approve,
    "review.reject": _review_reject,
})


def _calibrate(engine: Engine, p: dict[str, Any]) -> Any:
    """`semula calibrate`: the project's learnt thresholds and the verdicts behind them."""
    from dataclasses import asdict, replace

    from semula.core.calibration import CONFIDENCE, GRID, MIN_VERDICTS
    from semula.engine.calibrated import calibrate_project, project_curve

    project = p.get("project") or "default"
    settings = engine.settings_for(project)
    if p.get("max_false_hit_rate") is not None:
        settings = replace(settings, max_false_hit_rate=float(p["max_false_hit_rate"]))
    calibration = calibrate_project(engine.store, project, settings)
    return {"project": project, "near_serve": settings.near_serve, "max_false_hit_rate": settings.max_false_hit_rate,
            "confidence": CONFIDENCE, "min_verdicts": MIN_VERDICTS, "correction": calibration.correction,
            "grid": [GRID[0], GRID[-1], len(GRID)],
            "strata": [{**asdict(t), "serves": t.serves} for t in calibration.strata],
            **({"curve": [{"tier": tier, "stratum": stratum, "points": [asdict(point) for point in points]}
                          for (tier, stratum), points in project_curve(engine.store, project).items()]}
               if p.get("curve") else {})}


OPERATIONS["calibrate"] = _calibrate
