"""What the store takes and gives back, apart from any database: so the engine, the proxy and a
second store implementation share them without importing DuckDB.

`NewEntry`'s fields are the recorded columns: every column list the stores write is derived from them
(`store.rows`), so a new column is one field here plus a migration.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any, NamedTuple

from semula.core.httpfields import servable_headers


class StoreError(Exception):
    """The store cannot be opened, read or written. The message says why and what to do."""


def one_row(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row a query that always returns one gives (an aggregate, `RETURNING`): `fetchone()` may say None."""
    if row is None:
        raise StoreError("the store returned no row where one was expected")
    return row


class RecordingKind(StrEnum):
    """What a recording is: one HTTP call (request and answer), or a Realtime conversation over WebSocket
    (its messages; `recordings/conversations.py`). Only HTTP recordings take part in matching a call."""

    HTTP = "http"
    REALTIME = "realtime"


@dataclass(frozen=True, kw_only=True)
class RecordedCall:
    """One recorded call: where it went and what came back. A store row (`NewEntry`) and a recording
    file (`recordings.format.Recording`) both are one, plus how each keeps the request."""

    project: str
    provider: str
    host: str
    method: str
    endpoint: str
    model: str | None
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    streamed: bool
    prompt_tokens: int | None
    completion_tokens: int | None
    upstream_ms: float | None
    # Where it came from: user_agent, answered_model, semula (version); a loaded file's recorded_at.
    provenance: dict[str, str] | None = None
    kind: str = RecordingKind.HTTP  # a `RecordingKind`, as the store's `kind` column keeps it

    def call_fields(self) -> dict[str, Any]:
        """The shared fields by name, to build the other kind of record from this one."""
        return {f.name: getattr(self, f.name) for f in fields(RecordedCall)}


@dataclass(frozen=True, kw_only=True)
class NewEntry(RecordedCall):
    """A recording as the store keeps it: the call, its fingerprints, canonical request and last text."""

    request_fp: str
    normalised_fp: str
    canonical: dict[str, Any]
    last_text: str


@dataclass(frozen=True, kw_only=True)
class Entry(NewEntry):
    """A stored recording: what was written, plus its id and times."""

    id: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def of(cls, new: NewEntry, **stored: Any) -> Entry:
        """`new` as if stored, with the given id and times (what a dry run or an import shows)."""
        return cls(**{f.name: getattr(new, f.name) for f in fields(NewEntry)}, **stored)

    @property
    def sendable_headers(self) -> list[tuple[str, str]]:
        """The recorded headers that can be sent: one with CR, LF or NUL in it, or a name that is not
        a token, is never sent (a store another proxy writes is checked here too, not only files).
        Usually every header is fine: then it is `headers` itself, not a copy. Not cached: `wire_headers`
        is, and an entry in the answer cache holds nothing more than it counts."""
        ok, problems = servable_headers(self.headers)
        return ok if problems else self.headers

    @cached_property
    def wire_headers(self) -> tuple[tuple[bytes, bytes], ...] | None:
        """The answer's headers as mitmproxy sends them, `content-length` the body's (as `Response.make`
        sets it): encoded once per loaded entry, not per hit. None when a content- or transfer-encoding
        header leaves the body's framing to mitmproxy."""
        headers = self.sendable_headers
        names = {k.lower() for k, _ in headers}
        if "content-encoding" in names or "transfer-encoding" in names:
            return None
        length = str(len(self.body)).encode()
        wire = [(k.encode(), length if k.lower() == "content-length" else v.encode()) for k, v in headers]
        lengths = [i for i, (k, _) in enumerate(wire) if k.lower() == b"content-length"]
        if not lengths:
            return (*wire, (b"content-length", length))
        return tuple(field for i, field in enumerate(wire) if i not in lengths[1:])  # one, where the first was


class IndexRow(NamedTuple):
    """An entry as the fingerprint index loads it (a tuple: the index loads every entry at once)."""

    id: int
    project: str
    request_fp: str
    normalised_fp: str


class AliasRow(NamedTuple):
    """An approved alias as the fingerprint index loads it: this request is served that entry."""

    project: str
    normalised_fp: str
    entry_id: int


class AliasRequest(NamedTuple):
    """One of a project's aliases with the request it was approved for (None: written before they were kept)."""

    normalised_fp: str
    entry_id: int
    request: dict[str, Any] | None


class CanonicalRow(NamedTuple):
    """An entry's stored request, for a pass over the whole store (re-fingerprinting, an upgrade)."""

    id: int
    project: str
    canonical: dict[str, Any]


class NewCandidate(NamedTuple):
    """A near-match to queue for review against one request (`ReviewRows.add_candidates`)."""

    tier: str
    score: float
    guard_reason: str | None
    reason: str | None
    entry_id: int


@dataclass(frozen=True)
class ReviewCandidate:
    """A review-queue row. Its fields are the table's columns, in order: the stores' column list is
    derived from them (`store.rows`)."""

    id: int
    project: str
    tier: str
    score: float
    guard_reason: str | None
    reason: str | None
    request_fp: str
    request_normalised_fp: str
    request_canonical: dict[str, Any]
    request_text: str
    entry_id: int
    status: str  # open | approved | rejected | closed
    created_at: datetime | None
    decided_at: datetime | None


@dataclass(frozen=True)
class VectorStatus:
    """What `semula embeddings status` reports. `counts` is None when the store has no vector table yet;
    `missing` (entries without a vector from the asked model) is counted only when some may lack one."""

    entries: int
    counts: dict[str, int] | None
    missing: int | None
