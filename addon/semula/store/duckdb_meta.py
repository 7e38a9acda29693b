"""Store-wide values in the `meta` table: the fingerprint salt and version, versions of derived data."""

from __future__ import annotations

from contextlib import AbstractContextManager

import duckdb

from semula.store import migrations


class StoreMeta:
    """Mixed into `Store`, which provides the connection, its error mapping and transactions."""

    con: duckdb.DuckDBPyConnection
    follows = False  # the file has one writer, this process: nothing to follow
    reconnects = False  # a failed file is reopened (the store thread's recovery)

    def _errors(self) -> AbstractContextManager[None]: ...  # noqa: D102 - provided by Store
    def transaction(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...  # noqa: D102

    def meta(self, key: str) -> str | None:
        """A store-wide value (the fingerprint salt and version, the versions of derived data)."""
        with self._errors():
            row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def fingerprint_salt(self) -> bytes:
        """The salt keying the hash of every redacted secret in this store's fingerprints (made by 004_meta)."""
        return bytes.fromhex(self.meta(migrations.FINGERPRINT_SALT) or "")

    def fingerprint_version(self) -> str | None:
        return self.meta(migrations.FINGERPRINT_VERSION)

    def set_fingerprint_version(self, version: str) -> None:
        self.set_meta(migrations.FINGERPRINT_VERSION, version)

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as con:
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])
