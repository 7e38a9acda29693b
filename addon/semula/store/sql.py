"""The SQL both stores run, written once: entries read and listed, aliases, the review queue, settings, meta.

The DuckDB file and the Postgres server keep the same tables and columns, so a query differs only in a
few fragments. Each backend is a subclass that supplies them, as Django's backends supply their
`DatabaseOperations`: the driver's placeholder (the SQL here is written with `?`), `any_of` (a column
matching a list of ids), `upsert_sql` (insert or overwrite on a key), how it reads and how it runs a
transaction (each maps its driver's errors to `StoreError` there), `_many` (one statement over many
rows) and `_delete_vectors`. Recording (`upsert_entry`, `upsert_entries`), the preload
(`recent_entries`) and opening stay in the backend: those are where the two really differ.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from semula.store.rows import CANDIDATE_COLUMNS, ENTRY_COLUMNS, candidate_from_row, entry_from_row
from semula.store.types import (
    AliasRequest,
    AliasRow,
    CanonicalRow,
    Entry,
    IndexRow,
    NewCandidate,
    ReviewCandidate,
)

FINGERPRINT_SALT = "fingerprint_salt"  # meta key: hex of the store's fingerprint salt (made by a migration)
FINGERPRINT_VERSION = "fingerprint_version"  # meta key: the fingerprint version the stored fps were made under

_candidate = candidate_from_row
# Only HTTP recordings are matched, fingerprinted, near-searched or embedded; a Realtime conversation is
# found by its URL (`entries_with_normalised_fp`) and read whole (`recordings/conversations.py`).
MATCHED = "kind = 'http'"


def now() -> datetime:
    """The time the stores write (UTC, naive: both keep TIMESTAMP without a zone)."""
    return datetime.now(UTC).replace(tzinfo=None)


@lru_cache(maxsize=512)
def _marked(sql: str, placeholder: str) -> str:
    return sql if placeholder == "?" else sql.replace("?", placeholder)


def filters(**columns: Any) -> tuple[str, list[Any]]:
    """A WHERE clause (with `?`) for the columns given a value (None or empty: no filter), and its parameters."""
    given = {column: value for column, value in columns.items() if value}
    return " AND ".join([f"{column} = ?" for column in given] or ["true"]), list(given.values())


class SqlStore(ABC):
    """The `RecordingStore` methods whose SQL both backends share. Capabilities are declared here, with
    their defaults, and overridden by a backend (never probed)."""

    placeholder: ClassVar[str] = "?"  # the driver's parameter marker
    follows_changes: bool = False  # other writers' changes reach this store's engine (`change_position`, `follow`)
    reconnects: bool = False  # a failed call needs no reopening: the store reconnects by itself
    shared: bool = False  # other proxies use the same store at the same time (a server)
    file: Path | None = None  # the store's file in the data dir; None: not a file (a server)

    # --- the dialect: what a backend supplies ----------------------------------------------------

    @abstractmethod
    def _reading(self) -> AbstractContextManager[Any]:
        """A connection to read on (errors mapped to StoreError)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A connection in a transaction, committed when the block ends (errors mapped to StoreError)."""

    @abstractmethod
    def _many(self, con: Any, sql: str, rows: list[Sequence[Any]]) -> None:
        """Run `sql` (already marked) once per row, inside the caller's transaction."""

    @staticmethod
    @abstractmethod
    def any_of(column: str) -> str:
        """A condition (with one `?`, a list of ids) that `column` is one of them."""

    @staticmethod
    @abstractmethod
    def upsert_sql(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
        """INSERT of `columns` (with `?`) that overwrites the row already there for `key`."""

    @abstractmethod
    def _delete_vectors(self, con: Any, entry_id: int) -> None:
        """Delete an entry's vectors inside the caller's transaction."""

    # --- running the shared SQL ------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return _marked(sql, self.placeholder)

    def _run(self, con: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return con.execute(self._sql(sql), params)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._reading() as con:
            return con.execute(self._sql(sql), params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        with self._reading() as con:
            return con.execute(self._sql(sql), params).fetchone()

    def _update_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with self.transaction() as con:
                self._many(con, self._sql(sql), rows)

    # --- store-wide values -----------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A store-wide value (the fingerprint salt and version, the versions of derived data)."""
        row = self._one("SELECT value FROM meta WHERE key = ?", [key])
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as con:
            self._run(con, self.upsert_sql("meta", ("key", "value"), ("key",)), [key, value])

    def fingerprint_salt(self) -> bytes:
        """The salt keying the hash of every redacted secret in this store's fingerprints."""
        return bytes.fromhex(self.meta(FINGERPRINT_SALT) or "")

    def fingerprint_version(self) -> str | None:
        return self.meta(FINGERPRINT_VERSION)

    def set_fingerprint_version(self, version: str) -> None:
        self.set_meta(FINGERPRINT_VERSION, version)

    # --- entries ---------------------------------------------------------------------------------

    def get_entry(self, entry_id: int) -> Entry | None:
        row = self._one(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", [entry_id])
        return entry_from_row(row) if row else None

    def delete_entry(self, entry_id: int) -> bool:
        """Delete a recording with its aliases and vectors; its open review candidates are closed."""
        with self.transaction() as con:
            found = self._run(con, "SELECT count(*) FROM entries WHERE id = ?", [entry_id]).fetchone()[0]
            self._run(con, "DELETE FROM aliases WHERE entry_id = ?", [entry_id])
            self._run(con, "UPDATE review_candidates SET status = 'closed', decided_at = ? "
                           "WHERE entry_id = ? AND status = 'open'", [now(), entry_id])
            self._delete_vectors(con, entry_id)  # no vector outlives its recording
            self._run(con, "DELETE FROM entries WHERE id = ?", [entry_id])
        return bool(found)

    def list_entries(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        where, params = filters(project=project)
        sql = ("SELECT id, project, provider, model, endpoint, streamed, status, octet_length(body) AS size, "
               f"created_at, updated_at, last_text FROM entries WHERE {where} ORDER BY id DESC LIMIT ?")
        with self._reading() as con:
            cursor = con.execute(self._sql(sql), [*params, limit])
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def index_rows(self) -> list[IndexRow]:
        """Every entry's fingerprints: the in-memory index's source."""
        return [IndexRow(*r) for r in self._all(
            f"SELECT id, project, request_fp, normalised_fp FROM entries WHERE {MATCHED}")]

    def project_canonicals(self, project: str, provider: str | None = None, limit: int = 2000,
                           endpoint: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        where, params = filters(project=project, provider=provider, endpoint=endpoint)
        rows = self._all(f"SELECT id, canonical FROM entries WHERE {where} AND {MATCHED} ORDER BY id DESC LIMIT ?", [*params, limit])
        return [(int(i), json.loads(c)) for i, c in rows]

    def set_normalised_fps(self, updates: list[tuple[int, str]]) -> None:
        self._update_many("UPDATE entries SET normalised_fp = ? WHERE id = ?", [(fp, i) for i, fp in updates])

    def set_fingerprints(self, entries: list[tuple[int, str, str]], candidates: list[tuple[int, str, str]]) -> None:
        """(id, request_fp, normalised_fp) of entries and review candidates, in one transaction."""
        with self.transaction() as con:
            if entries:
                self._many(con, self._sql("UPDATE entries SET request_fp = ?, normalised_fp = ? WHERE id = ?"),
                           [(r, n, i) for i, r, n in entries])
            if candidates:
                self._many(con, self._sql("UPDATE review_candidates SET request_fp = ?, request_normalised_fp = ? "
                                          "WHERE id = ?"), [(r, n, i) for i, r, n in candidates])

    def canonicals_after(self, after_id: int, limit: int = 1000) -> list[CanonicalRow]:
        """The entries after `after_id`, in id order: a batch of a full pass."""
        rows = self._all(f"SELECT id, project, canonical FROM entries WHERE id > ? AND {MATCHED} ORDER BY id LIMIT ?",
                         [after_id, limit])
        return [CanonicalRow(int(i), p, json.loads(c)) for i, p, c in rows]

    def set_last_texts(self, updates: list[tuple[int, str]]) -> None:
        self._update_many("UPDATE entries SET last_text = ? WHERE id = ?", [(t, i) for i, t in updates])

    def canonicals_by_ids(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        rows = self._all(f"SELECT id, canonical FROM entries WHERE {self.any_of('id')}", [list(ids)])
        return {int(i): json.loads(c) for i, c in rows}

    def entries_between(self, first: int, last: int) -> list[Entry]:
        """The entries with ids from `first` to `last`, in id order: a range the table's order serves (DuckDB
        skips the row groups outside it; `entries_by_ids` scans every row)."""
        rows = self._all(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id BETWEEN ? AND ? ORDER BY id", [first, last])
        return [entry_from_row(row) for row in rows]

    def entries_by_ids(self, ids: list[int]) -> list[Entry]:
        rows = self._all(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE {self.any_of('id')}", [list(ids)])
        return [entry_from_row(row) for row in rows]

    def entries_with_normalised_fp(self, project: str, normalised_fp: str) -> list[int]:
        rows = self._all("SELECT id FROM entries WHERE project = ? AND normalised_fp = ?", [project, normalised_fp])
        return [int(r[0]) for r in rows]

    def projects(self) -> list[str]:
        return [r[0] for r in self._all(
            "SELECT project FROM entries UNION SELECT project FROM project_settings ORDER BY 1")]

    # --- aliases ---------------------------------------------------------------------------------

    def alias_rows(self) -> list[AliasRow]:
        rows = self._all("SELECT project, normalised_fp, entry_id FROM aliases")
        return [AliasRow(p, fp, int(e)) for p, fp, e in rows]

    def alias_requests(self, project: str) -> list[AliasRequest]:
        rows = self._all("SELECT normalised_fp, entry_id, request_canonical FROM aliases WHERE project = ?", [project])
        return [AliasRequest(fp, int(e), json.loads(c) if c else None) for fp, e, c in rows]

    def replace_aliases(self, project: str, aliases: list[AliasRequest]) -> None:
        """The project's aliases become `aliases`; the same set again writes nothing (on a shared store:
        no change-log rows, no reload on every other proxy)."""
        insert = self.upsert_sql("aliases", ("project", "normalised_fp", "entry_id", "created_at", "request_canonical"),
                                 ("project", "normalised_fp"))
        with self.transaction() as con:
            current = {(fp, int(e)) for fp, e in self._run(
                con, "SELECT normalised_fp, entry_id FROM aliases WHERE project = ?", [project]).fetchall()}
            if current == {(fp, e) for fp, e, _ in aliases} and len(current) == len(aliases):
                return
            self._run(con, "DELETE FROM aliases WHERE project = ?", [project])
            for fp, entry_id, request in aliases:
                self._run(con, insert, [project, fp, entry_id, now(),
                                        json.dumps(request) if request is not None else None])

    # --- review queue ----------------------------------------------------------------------------

    def paired_entries(self, project: str, request_normalised_fp: str) -> dict[int, str]:
        """entry id -> status of every candidate ever made for this request (never pair twice)."""
        rows = self._all("SELECT entry_id, status FROM review_candidates WHERE project = ? "
                         "AND request_normalised_fp = ?", [project, request_normalised_fp])
        return {int(e): s for e, s in rows}

    def add_candidates(self, project: str, request_fp: str, request_normalised_fp: str,
                       request_canonical: dict[str, Any], request_text: str,
                       candidates: list[NewCandidate]) -> list[ReviewCandidate]:
        """Queue candidates of one request, in one transaction."""
        request_json = json.dumps(request_canonical, ensure_ascii=False)
        rows = []
        with self.transaction() as con:
            for tier, score, guard_reason, reason, entry_id in candidates:
                rows.append(self._run(con, (
                    "INSERT INTO review_candidates (project, tier, score, guard_reason, reason, request_fp, "
                    "request_normalised_fp, request_canonical, request_text, entry_id, status, created_at) "
                    f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) RETURNING {CANDIDATE_COLUMNS}"),
                    [project, tier, score, guard_reason, reason, request_fp, request_normalised_fp,
                     request_json, request_text, entry_id, now()]).fetchone())
        return [_candidate(row) for row in rows]

    def candidates(self, project: str | None = None, status: str | None = "open", limit: int = 200,
                   entry_id: int | None = None) -> list[ReviewCandidate]:
        where, params = filters(project=project, status=status, entry_id=entry_id)
        return [_candidate(r) for r in self._all(
            f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE {where} ORDER BY id LIMIT ?", [*params, limit])]

    def candidate(self, candidate_id: int) -> ReviewCandidate | None:
        row = self._one(f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE id = ?", [candidate_id])
        return _candidate(row) if row else None

    def set_candidate_status(self, candidate_ids: list[int], status: str) -> None:
        if candidate_ids:
            with self.transaction() as con:
                self._run(con, f"UPDATE review_candidates SET status = ?, decided_at = ? WHERE {self.any_of('id')}",
                          [status, now(), list(candidate_ids)])

    def open_candidates_for(self, project: str, request_normalised_fp: str,
                            created_before: datetime | None = None) -> list[ReviewCandidate]:
        sql = (f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE project = ? AND request_normalised_fp = ? "
               "AND status = 'open'")
        params: list[Any] = [project, request_normalised_fp]
        if created_before is not None:
            sql += " AND created_at < ?"
            params.append(created_before)
        return [_candidate(r) for r in self._all(sql, params)]

    def open_request_keys(self) -> set[tuple[str, str]]:
        return {(p, fp) for p, fp in self._all(
            "SELECT DISTINCT project, request_normalised_fp FROM review_candidates WHERE status = 'open'")}

    # --- settings --------------------------------------------------------------------------------

    def project_settings(self, project: str) -> dict[str, Any]:
        return {key: json.loads(value) for key, value in self._all(
            "SELECT key, value FROM project_settings WHERE project = ?", [project])}

    def all_project_settings(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for project, key, value in self._all("SELECT project, key, value FROM project_settings"):
            out.setdefault(project, {})[key] = json.loads(value)
        return out

    def set_project_setting(self, project: str, key: str, value: Any) -> None:
        with self.transaction() as con:
            self._run(con, self.upsert_sql("project_settings", ("project", "key", "value"), ("project", "key")),
                      [project, key, json.dumps(value)])
