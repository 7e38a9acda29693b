"""The Postgres store's review queue and per-project settings: one queue for the whole team.

Mixed into `PgStore`, which provides `connection()` (a pooled transaction) and the `_all`/`_one` reads.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import psycopg

from semula.store.rows import CANDIDATE_COLUMNS, candidate_from_row

_candidate = candidate_from_row


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class PgReviewAndSettings:
    def connection(self) -> AbstractContextManager[psycopg.Connection]: ...  # noqa: D102 - PgStore's
    def _all(self, sql: str, params: Any = None) -> list[tuple]: ...  # noqa: D102
    def _one(self, sql: str, params: Any = None) -> tuple | None: ...  # noqa: D102

    @staticmethod
    def filters(**columns: Any) -> tuple[str, list[Any]]:
        """A WHERE clause for the columns given a value (None or empty: no filter), and its parameters."""
        given = {column: value for column, value in columns.items() if value}
        return " AND ".join([f"{column} = %s" for column in given] or ["true"]), list(given.values())

    # --- review queue ----------------------------------------------------------------------------

    def paired_entries(self, project: str, request_normalised_fp: str) -> dict[int, str]:
        rows = self._all("SELECT entry_id, status FROM review_candidates "
                         "WHERE project = %s AND request_normalised_fp = %s", [project, request_normalised_fp])
        return {int(e): s for e, s in rows}

    def add_candidates(self, project: str, request_fp: str, request_normalised_fp: str,
                       request_canonical: dict[str, Any], request_text: str,
                       candidates: list[tuple[str, float, str | None, str | None, int]]) -> list[dict[str, Any]]:
        request_json = json.dumps(request_canonical, ensure_ascii=False)
        rows = []
        with self.connection() as con:
            for tier, score, guard_reason, reason, entry_id in candidates:
                rows.append(con.execute(
                    f"""INSERT INTO review_candidates (project, tier, score, guard_reason, reason, request_fp,
                        request_normalised_fp, request_canonical, request_text, entry_id, status, created_at)
                        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'open', %s) RETURNING {CANDIDATE_COLUMNS}""",
                    [project, tier, score, guard_reason, reason, request_fp, request_normalised_fp,
                     request_json, request_text, entry_id, _now()]).fetchone())
        return [_candidate(row) for row in rows]

    def candidates(self, project: str | None = None, status: str | None = "open",
                   limit: int = 200, entry_id: int | None = None) -> list[dict[str, Any]]:
        where, params = self.filters(project=project, status=status, entry_id=entry_id)
        return [_candidate(r) for r in self._all(
            f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE {where} ORDER BY id LIMIT %s", [*params, limit])]

    def candidate(self, candidate_id: int) -> dict[str, Any] | None:
        row = self._one(f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE id = %s", [candidate_id])
        return _candidate(row) if row else None

    def set_candidate_status(self, candidate_ids: list[int], status: str) -> None:
        if candidate_ids:
            with self.connection() as con:
                con.execute("UPDATE review_candidates SET status = %s, decided_at = %s WHERE id = ANY(%s)",
                            [status, _now(), list(candidate_ids)])

    def open_candidates_for(self, project: str, request_normalised_fp: str,
                            created_before: datetime | None = None) -> list[dict[str, Any]]:
        sql = (f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE project = %s "
               "AND request_normalised_fp = %s AND status = 'open'")
        params: list[Any] = [project, request_normalised_fp]
        if created_before is not None:
            sql += " AND created_at < %s"
            params.append(created_before)
        return [_candidate(r) for r in self._all(sql, params)]

    def open_request_keys(self) -> set[tuple[str, str]]:
        return {(p, fp) for p, fp in self._all(
            "SELECT DISTINCT project, request_normalised_fp FROM review_candidates WHERE status = 'open'")}

    # --- settings --------------------------------------------------------------------------------

    def project_settings(self, project: str) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._all(
            "SELECT key, value FROM project_settings WHERE project = %s", [project])}

    def all_project_settings(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for project, key, value in self._all("SELECT project, key, value FROM project_settings"):
            out.setdefault(project, {})[key] = json.loads(value)
        return out

    def set_project_setting(self, project: str, key: str, value: Any) -> None:
        with self.connection() as con:
            con.execute("INSERT INTO project_settings VALUES (%s, %s, %s) ON CONFLICT (project, key) "
                        "DO UPDATE SET value = EXCLUDED.value", [project, key, json.dumps(value)])

