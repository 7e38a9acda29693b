"""The store's schema: named, ordered, forward-only migrations, all in one place.

Each migration runs once, in its own transaction, and is recorded by name in `schema_migrations`;
an existing store opens unchanged because names and DDL never change once released. A schema
change is a new migration appended to `MIGRATIONS`, never an edit of an old one.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
import duckdb

from semula.store.candidate_shapes import OPEN_CANDIDATES_SQL, closures
from semula.store.sql import FINGERPRINT_SALT, now

Migration = Callable[[duckdb.DuckDBPyConnection], None]


def _m001_core(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SEQUENCE entry_id_seq START 1")
    con.execute(
        """
        CREATE TABLE entries (
            id BIGINT PRIMARY KEY DEFAULT nextval('entry_id_seq'),
            project VARCHAR NOT NULL,
            provider VARCHAR NOT NULL,
            host VARCHAR NOT NULL,
            method VARCHAR NOT NULL,
            endpoint VARCHAR NOT NULL,
            model VARCHAR,
            request_fp VARCHAR NOT NULL,
            normalised_fp VARCHAR NOT NULL,
            canonical VARCHAR NOT NULL,
            last_text VARCHAR NOT NULL,
            status INTEGER NOT NULL,
            headers VARCHAR NOT NULL,
            body BLOB NOT NULL,
            streamed BOOLEAN NOT NULL,
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            upstream_ms DOUBLE,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )
    con.execute(
        """
        CREATE TABLE aliases (
            project VARCHAR NOT NULL,
            normalised_fp VARCHAR NOT NULL,
            entry_id BIGINT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (project, normalised_fp)
        )
        """
    )
    con.execute(
        """
        CREATE TABLE project_settings (
            project VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            value VARCHAR NOT NULL,
            PRIMARY KEY (project, key)
        )
        """
    )


def _m002_review(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SEQUENCE candidate_id_seq START 1")
    con.execute(
        """
        CREATE TABLE review_candidates (
            id BIGINT PRIMARY KEY DEFAULT nextval('candidate_id_seq'),
            project VARCHAR NOT NULL,
            tier VARCHAR NOT NULL,
            score DOUBLE NOT NULL,
            guard_reason VARCHAR,
            reason VARCHAR,
            request_fp VARCHAR NOT NULL,
            request_normalised_fp VARCHAR NOT NULL,
            request_canonical VARCHAR NOT NULL,
            request_text VARCHAR NOT NULL,
            entry_id BIGINT NOT NULL,
            status VARCHAR NOT NULL,          -- open | approved | rejected | closed
            created_at TIMESTAMP NOT NULL,
            decided_at TIMESTAMP
        )
        """
    )
    # An alias keeps the request it was approved for, so a settings change can re-fingerprint it.
    con.execute("ALTER TABLE aliases ADD COLUMN request_canonical VARCHAR")


def create_vector_table(con: duckdb.DuckDBPyConnection) -> None:
    """The embedding tier's vectors, one row per (entry, model). Idempotent."""
    con.execute(
        """
        CREATE TABLE IF NOT EXISTS entry_vector (
            entry_id BIGINT NOT NULL,
            model VARCHAR NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (entry_id, model)
        )
        """
    )


def _m003_embeddings(con: duckdb.DuckDBPyConnection) -> None:
    create_vector_table(con)




def _m004_meta(con: duckdb.DuckDBPyConnection) -> None:
    """Store-wide values, and the salt that keys every redacted secret's hash (32 random bytes, made once).

    No fingerprint version is written: the engine re-fingerprints a store that records none.
    """
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    con.execute("INSERT INTO meta VALUES (?, ?)", [FINGERPRINT_SALT, secrets.token_hex(32)])


def _m005_close_cross_shape_candidates(con: duckdb.DuckDBPyConnection) -> None:
    """Close the open review candidates that cross a shape or whose request has its own recording (issue 21)."""
    for candidate_id, reason in closures(con.execute(OPEN_CANDIDATES_SQL).fetchall()):
        con.execute("UPDATE review_candidates SET status = 'closed', reason = ?, decided_at = ? "
                    "WHERE id = ? AND status = 'open'", [reason, now(), candidate_id])


def _m006_provenance(con: duckdb.DuckDBPyConnection) -> None:
    """Where a recording came from (user-agent, answered model, semula version, a file's recorded_at): one
    JSON text column, NULL for the recordings made before it."""
    con.execute("ALTER TABLE entries ADD COLUMN provenance VARCHAR")


def _m007_kind(con: duckdb.DuckDBPyConnection) -> None:
    """Which kind of recording an entry is (`RecordingKind`): every entry before it is an HTTP call."""
    con.execute("ALTER TABLE entries ADD COLUMN kind VARCHAR DEFAULT 'http'")


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_core", _m001_core),
    ("002_review", _m002_review),
    ("003_embeddings", _m003_embeddings),
    ("004_meta", _m004_meta),
    ("005_close_cross_shape_candidates", _m005_close_cross_shape_candidates),
    ("006_provenance", _m006_provenance),
    ("007_kind", _m007_kind),
)


def pending(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `con`'s database lacks a migration (read without writing)."""
    found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_migrations'").fetchone()
    if not found or not found[0]:
        return True
    done = {row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()}
    return any(name not in done for name, _ in MIGRATIONS)


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply every migration `con`'s database has not had yet, in order; returns the names applied.

    DuckDB errors propagate: the caller maps them (it knows the store's path).
    """
    con.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    done = {row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()}
    applied = []
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        con.begin()
        try:
            migration(con)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?)", [name, now()])
        except BaseException:
            con.rollback()
            raise
        con.commit()
        applied.append(name)
    if applied:  # DuckDB cannot replay an ALTER TABLE from its WAL after a crash: keep DDL out of it
        con.execute("CHECKPOINT")
    return applied
