"""The store interface the engine programs against: the DuckDB file (`duckdb.store.DuckDBStore`) and the
Postgres server (`postgres.store.PgStore`) both implement it, so the engine never learns which it has.

Structural typing (`typing.Protocol`): an implementation only needs these methods, no base class.
The port is split by role, as Django splits a connection into operations, features and introspection:
`Entries`, `Aliases`, `ReviewRows`, `ProjectSettingRows`, `Meta` and the declared `Features`;
`RecordingStore` is all of them, and a part that needs less takes less. Rows cross it typed
(`store.types`: `IndexRow`, `AliasRow`, `ReviewCandidate`, …), never as bare tuples or dicts.
Every method raises `StoreError` (and nothing database-specific) when the store cannot do it.
Nothing here imports a database driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from semula.store.types import (
    AliasRequest,
    AliasRow,
    CanonicalRow,
    Entry,
    IndexRow,
    NewCandidate,
    NewEntry,
    ReviewCandidate,
)

if TYPE_CHECKING:  # only in annotations: numpy loads with the vectors, not with every store import
    import numpy as np


class LexicalProposer(Protocol):
    """Full-text retrieval over the entries' last texts (proposals only; scoring happens elsewhere)."""

    last_build_seconds: float | None

    def written(self, entry_id: int, project: str, text: str) -> None: ...
    def deleted(self, entry_id: int) -> None: ...
    def maybe_rebuild(self, wait: bool = False) -> None: ...
    def propose(self, project: str, text: str, limit: int = ...) -> list[int]: ...
    def nbytes(self) -> int: ...  # what it holds in this process's memory
    def close(self) -> None: ...


class VectorStore(Protocol):
    """The embedding tier's vectors, keyed by (entry id, model name)."""

    def for_thread(self) -> VectorStore: ...
    def close(self) -> None: ...
    def ensure_table(self) -> None: ...
    def put(self, model: str, rows: Iterable[tuple[int, np.ndarray]]) -> int: ...
    def load(self, model: str, project: str) -> tuple[np.ndarray, np.ndarray]: ...
    def entries_without(self, model: str, limit: int = ...) -> list[tuple[int, str, dict[str, Any]]]: ...
    def count_without(self, model: str) -> int: ...
    def counts(self) -> dict[str, int]: ...


class ChangeLog(Protocol):
    """What a store that `follows_changes` has besides: its change log's position, and a follower of it."""

    def change_position(self) -> int: ...
    def follow(self, after: int, apply: Callable[[list[Any]], None], poll_seconds: float | None = None) -> None: ...


class Meta(Protocol):
    """Store-wide values: the fingerprint salt and the version the stored fingerprints were made under."""

    def meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def fingerprint_salt(self) -> bytes: ...
    def fingerprint_version(self) -> str | None: ...
    def set_fingerprint_version(self, version: str) -> None: ...


class EntryLookups(Protocol):
    """Recordings read by id or fingerprint: what the review queue needs of them."""

    def get_entry(self, entry_id: int) -> Entry | None: ...
    def entries_by_ids(self, ids: list[int]) -> list[Entry]: ...
    def entries_between(self, first: int, last: int) -> list[Entry]: ...
    def canonicals_by_ids(self, ids: list[int]) -> dict[int, dict[str, Any]]: ...
    def entries_with_normalised_fp(self, project: str, normalised_fp: str) -> list[int]: ...


class Entries(EntryLookups, Protocol):
    """The recordings: written, listed, preloaded, re-fingerprinted, deleted."""

    def upsert_entry(self, new: NewEntry) -> int: ...
    def upsert_entries(self, news: list[NewEntry]) -> list[int]: ...
    def recent_entries(self, max_bytes: int, stopping: Callable[[], bool] = ...) -> list[Entry]: ...
    def memory_bytes(self) -> int | None: ...
    def delete_entry(self, entry_id: int) -> bool: ...
    def list_entries(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]: ...
    def index_rows(self) -> list[IndexRow]: ...
    def project_canonicals(self, project: str, provider: str | None = None, limit: int = 2000,
                           endpoint: str | None = None) -> list[tuple[int, dict[str, Any]]]: ...
    def canonicals_after(self, after_id: int, limit: int = ...) -> list[CanonicalRow]: ...
    # (id, normalised_fp); (id, request_fp, normalised_fp) of entries and of review candidates, in one go
    def set_normalised_fps(self, updates: list[tuple[int, str]]) -> None: ...
    def set_fingerprints(self, entries: list[tuple[int, str, str]],
                         candidates: list[tuple[int, str, str]]) -> None: ...
    def set_last_texts(self, updates: list[tuple[int, str]]) -> None: ...
    def projects(self) -> list[str]: ...


class Aliases(Protocol):
    """Approved aliases: a request served another request's recording."""

    def alias_rows(self) -> list[AliasRow]: ...
    def alias_requests(self, project: str) -> list[AliasRequest]: ...
    def replace_aliases(self, project: str, aliases: list[AliasRequest]) -> None: ...


class ReviewRows(Protocol):
    """The review queue's rows: near-matches waiting for a person, and their verdicts."""

    def paired_entries(self, project: str, request_normalised_fp: str) -> dict[int, str]: ...
    def add_candidates(self, project: str, request_fp: str, request_normalised_fp: str,
                       request_canonical: dict[str, Any], request_text: str,
                       candidates: list[NewCandidate]) -> list[ReviewCandidate]: ...
    def candidates(self, project: str | None = None, status: str | None = "open",
                   limit: int = 200, entry_id: int | None = None) -> list[ReviewCandidate]: ...
    def candidate(self, candidate_id: int) -> ReviewCandidate | None: ...
    def set_candidate_status(self, candidate_ids: list[int], status: str) -> None: ...
    def open_candidates_for(self, project: str, request_normalised_fp: str,
                            created_before: datetime | None = None) -> list[ReviewCandidate]: ...
    def open_request_keys(self) -> set[tuple[str, str]]: ...


class ReviewStore(ReviewRows, Aliases, EntryLookups, Protocol):
    """What the review queue reads and writes: its rows, the aliases an approval makes, the recordings by id."""


class ProjectSettingRows(Protocol):
    """Per-project settings as stored (`semula config set`); `core.settings` parses them."""

    def project_settings(self, project: str) -> dict[str, Any]: ...
    def all_project_settings(self) -> dict[str, dict[str, Any]]: ...
    def set_project_setting(self, project: str, key: str, value: Any) -> None: ...


class Features(Protocol):
    """What a store is, declared, never probed (as Django declares a backend's `features`);
    `store.sql.SqlStore` gives their defaults."""

    # an engine on this store follows other writers' changes (it is then also a `ChangeLog`)
    follows_changes: bool
    # a failed call needs no reopening: the store reconnects by itself, the engine keeps serving from memory
    reconnects: bool
    # other proxies use the same store at the same time (a server)
    shared: bool
    # the store's file in the data dir (its replacement under a running proxy is noticed); None: a server
    file: Path | None


class RecordingStore(Entries, Aliases, ReviewRows, ProjectSettingRows, Meta, Features, Protocol):
    """Recordings, aliases, the review queue and per-project settings, plus the indexes beside them.
    Called from one thread (`for_thread` gives another thread its own handle). A part that needs one
    role takes that role's Protocol (the review queue takes `ReviewStore`)."""

    @property
    def vectors(self) -> VectorStore: ...  # read-only: each backend holds its own kind

    def for_thread(self) -> RecordingStore: ...
    def lexical_index(self, on_error: Callable[[Exception], None] | None = None) -> LexicalProposer: ...
    def close(self) -> None: ...


CANONICALS_PAGE = 64  # rows a page: 64 prompts of 1 MB stay well inside DuckDB's 512 MB


def each_canonical(store: Entries, project: str | None = None, page: int | None = None) -> Iterator[CanonicalRow]:
    """Every entry's (id, project, canonical), of one project or all, in id order, a page at a time: a pass
    over the whole store (re-fingerprinting, an upgrade) never holds it whole (10k prompts of 20 KB ran
    out of DuckDB's memory in one query)."""
    after = 0
    while rows := store.canonicals_after(after, page or CANONICALS_PAGE):
        yield from (row for row in rows if project is None or row.project == project)
        after = rows[-1].id
