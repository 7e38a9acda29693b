"""The Postgres store's schema: named, ordered, forward-only migrations under a transaction-level lock.

All pending migrations run in one transaction that first takes `pg_advisory_xact_lock`, so two
proxies starting at once never race: the second waits, then finds them applied. A session-level
lock would break behind PgBouncer's transaction pooling (the session is not ours); the
transaction-level one is released by the commit on whatever server connection ran it.

Besides the tables the DuckDB store has, the schema keeps a change log (`changes`): triggers add a
row, with a monotonically increasing id, for every write to recordings, aliases, settings and
review candidates, and `pg_notify('semula_changes', id)` at commit, so every proxy on the server
learns of the others' writes (`changes`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import psycopg

from semula.store.candidate_shapes import OPEN_CANDIDATES_SQL, closures
from semula.store.sql import FINGERPRINT_SALT

Migration = Callable[[psycopg.Connection], None]

LOCK_KEY = 0x5E3D_1A  # the advisory lock every semula migration takes (any constant, the same everywhere)
CHANNEL = "semula_changes"
# The full-text configuration the proposals use: english's Snowball stems with no stopword list (as
# DuckDB's index, `stopwords='none'`): english's list drops "say", "hi", "could", "you", "not" and the
# number words, so a prompt made of them proposed nothing and a person could not review it.
TEXT_SEARCH_CONFIG = "semula_english"


def _m001_core(con: psycopg.Connection) -> None:
    con.execute("""
        CREATE TABLE entries (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            project TEXT NOT NULL,
            provider TEXT NOT NULL,
            host TEXT NOT NULL,
            method TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            model TEXT,
            request_fp TEXT NOT NULL,   -- in the ordered-repeats mode it carries the sequence number
            normalised_fp TEXT NOT NULL,
            canonical TEXT NOT NULL,    -- text, not jsonb: the stored request keeps its key order
            last_text TEXT NOT NULL,
            status INTEGER NOT NULL,
            headers TEXT NOT NULL,
            body BYTEA NOT NULL,
            streamed BOOLEAN NOT NULL,
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            upstream_ms DOUBLE PRECISION,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            UNIQUE (project, request_fp)
        )""")
    con.execute("CREATE INDEX entries_normalised ON entries (project, normalised_fp)")
    con.execute("""
        CREATE TABLE aliases (
            project TEXT NOT NULL,
            normalised_fp TEXT NOT NULL,
            entry_id BIGINT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            request_canonical TEXT,
            PRIMARY KEY (project, normalised_fp)
        )""")
    con.execute("""
        CREATE TABLE project_settings (
            project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (project, key)
        )""")
    con.execute("""
        CREATE TABLE review_candidates (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            project TEXT NOT NULL,
            tier TEXT NOT NULL,
            score DOUBLE PRECISION NOT NULL,
            guard_reason TEXT,
            reason TEXT,
            request_fp TEXT NOT NULL,
            request_normalised_fp TEXT NOT NULL,
            request_canonical TEXT NOT NULL,
            request_text TEXT NOT NULL,
            entry_id BIGINT NOT NULL,
            status TEXT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            decided_at TIMESTAMP
        )""")
    con.execute("CREATE INDEX review_request ON review_candidates (project, request_normalised_fp)")
    con.execute("""
        CREATE TABLE entry_vector (
            entry_id BIGINT NOT NULL, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BYTEA NOT NULL,
            created_at TIMESTAMP NOT NULL, PRIMARY KEY (entry_id, model)
        )""")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO meta VALUES (%s, %s)", [FINGERPRINT_SALT, secrets.token_hex(32)])


def _m002_lexical(con: psycopg.Connection) -> None:
    """Full-text search over the scrubbed last text: always current, no rebuild (unlike DuckDB's FTS)."""
    con.execute("ALTER TABLE entries ADD COLUMN last_tsv tsvector "
                "GENERATED ALWAYS AS (to_tsvector('english', left(last_text, 100000))) STORED")
    con.execute("CREATE INDEX entries_last_tsv ON entries USING GIN (last_tsv)")


def _m003_changes(con: psycopg.Connection) -> None:
    """The change log other proxies follow, filled by triggers so that every writer (a proxy, the CLI,
    an import) is covered."""
    con.execute("""
        CREATE TABLE changes (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind TEXT NOT NULL,       -- entry | entry_deleted | alias | settings | candidate
            project TEXT NOT NULL,
            ref BIGINT,               -- the entry or candidate id
            at TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'utc')
        )""")
    con.execute(f"""
        CREATE FUNCTION semula_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            row_ RECORD := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
            kind_ TEXT := TG_ARGV[0];
            ref_ BIGINT;
            id_ BIGINT;
        BEGIN
            IF kind_ = 'entry' AND TG_OP = 'DELETE' THEN kind_ := 'entry_deleted'; END IF;
            IF kind_ IN ('entry', 'candidate') THEN ref_ := row_.id; END IF;
            INSERT INTO changes (kind, project, ref) VALUES (kind_, row_.project, ref_) RETURNING id INTO id_;
            PERFORM pg_notify('{CHANNEL}', id_::text);
            RETURN NULL;
        END $$""")
    for table, kind, events in (("entries", "entry", "INSERT OR UPDATE OR DELETE"),
                                ("aliases", "alias", "INSERT OR UPDATE OR DELETE"),
                                ("project_settings", "settings", "INSERT OR UPDATE OR DELETE"),
                                ("review_candidates", "candidate", "INSERT OR UPDATE OF status")):
        con.execute(f"CREATE TRIGGER {table}_changed AFTER {events} ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION semula_changed('{kind}')")


def _m004_close_cross_shape_candidates(con: psycopg.Connection) -> None:
    """Close the open review candidates that cross a shape or whose request has its own recording (issue 21)."""
    for candidate_id, reason in closures(con.execute(OPEN_CANDIDATES_SQL).fetchall()):
        con.execute("UPDATE review_candidates SET status = 'closed', reason = %s, "
                    "decided_at = (now() AT TIME ZONE 'utc') WHERE id = %s AND status = 'open'",
                    [reason, candidate_id])


def _m005_provenance(con: psycopg.Connection) -> None:
    """Where a recording came from, as JSON text (NULL before it): the same column as DuckDB's."""
    con.execute("ALTER TABLE entries ADD COLUMN provenance TEXT")


def _m006_kind(con: psycopg.Connection) -> None:
    """Which kind of recording an entry is (`RecordingKind`): the same column as DuckDB's."""
    con.execute("ALTER TABLE entries ADD COLUMN kind TEXT NOT NULL DEFAULT 'http'")


def _m007_lexical_without_stopwords(con: psycopg.Connection) -> None:
    """The full text rebuilt under `TEXT_SEARCH_CONFIG`: english's stems, no stopwords (made in the
    store's schema, which the connections' search_path names)."""
    con.execute("CREATE TEXT SEARCH DICTIONARY semula_english_stem (TEMPLATE = snowball, Language = english)")
    con.execute(f"CREATE TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG} (COPY = english)")
    con.execute(f"ALTER TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG} "
                "ALTER MAPPING REPLACE english_stem WITH semula_english_stem")
    con.execute("DROP INDEX entries_last_tsv")
    con.execute("ALTER TABLE entries DROP COLUMN last_tsv")
    con.execute(f"ALTER TABLE entries ADD COLUMN last_tsv tsvector "
                f"GENERATED ALWAYS AS (to_tsvector('{TEXT_SEARCH_CONFIG}', left(last_text, 100000))) STORED")
    con.execute("CREATE INDEX entries_last_tsv ON entries USING GIN (last_tsv)")


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_core", _m001_core),
    ("002_lexical", _m002_lexical),
    ("003_changes", _m003_changes),
    ("004_close_cross_shape_candidates", _m004_close_cross_shape_candidates),
    ("005_provenance", _m005_provenance),
    ("006_kind", _m006_kind),
    ("007_lexical_without_stopwords", _m007_lexical_without_stopwords),
)


def migrate(con: psycopg.Connection) -> list[str]:
    """Apply the pending migrations in one transaction under the advisory lock; returns their names."""
    with con.transaction():
        # Another proxy's migration may hold the lock for a while (a big table rewritten): wait for it
        # rather than time out; the client-side watchdog still fails the call if the server freezes.
        con.execute("SET LOCAL statement_timeout = 0")
        con.execute("SET LOCAL lock_timeout = 0")
        con.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(name TEXT PRIMARY KEY, applied_at TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'utc'))")
        done = {row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()}
        applied = []
        for name, migration in MIGRATIONS:
            if name not in done:
                migration(con)
                con.execute("INSERT INTO schema_migrations (name) VALUES (%s)", [name])
                applied.append(name)
    return applied
