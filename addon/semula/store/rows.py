"""The stored rows both stores read back: their column lists and the values they become.

The DuckDB file and the Postgres server keep the same columns (JSON as text, so a stored
request keeps its key order), so one reading serves both.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import TYPE_CHECKING

from semula.store.types import Entry, NewEntry, ReviewCandidate

if TYPE_CHECKING:
    import numpy as np

RECORDED = tuple(f.name for f in fields(NewEntry))  # the columns a recording writes, in field order
KEY = ("project", "request_fp")  # what makes a recording unique: re-recording it updates the row
WRITTEN = tuple(c for c in RECORDED if c not in KEY)  # what re-recording overwrites
_JSON = ("canonical", "headers", "provenance")  # kept as JSON text (provenance may be NULL)
ENTRY_COLUMNS = ", ".join(("id", *RECORDED, "created_at", "updated_at"))
CANDIDATE_COLUMNS = ", ".join(f.name for f in fields(ReviewCandidate))  # the review queue's, in field order
ENTRY_NAMES = [c.strip() for c in ENTRY_COLUMNS.split(",")]


def column_value(new: NewEntry, column: str) -> object:
    """`new`'s value for `column` as the stores write it."""
    value = getattr(new, column)
    return json.dumps(value, ensure_ascii=False) if column in _JSON and value is not None else value


def written_values(new: NewEntry, columns: tuple[str, ...] = WRITTEN) -> list[object]:
    """`new`'s values for `columns` (by default `WRITTEN`), in that order."""
    return [column_value(new, c) for c in columns]


def entry_from_row(row: tuple) -> Entry:
    values = dict(zip(ENTRY_NAMES, row))
    values["canonical"] = json.loads(values["canonical"])
    values["headers"] = [tuple(h) for h in json.loads(values["headers"])]
    values["provenance"] = json.loads(values["provenance"]) if values.get("provenance") else None
    values["body"] = bytes(values["body"]) if values["body"] is not None else b""
    return Entry(**values)


def candidate_from_row(row: tuple) -> ReviewCandidate:
    """A `CANDIDATE_COLUMNS` row (the stored request is JSON text)."""
    (id_, project, tier, score, guard_reason, reason, request_fp, normalised_fp, canonical, text, entry_id,
     status, created_at, decided_at) = row
    return ReviewCandidate(int(id_), project, tier, score, guard_reason, reason, request_fp, normalised_fp,
                           json.loads(canonical), text, int(entry_id), status, created_at, decided_at)


def vector_matrix(rows: list[tuple[int, int, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """(entry id, dim, float32 bytes) rows as an id array and a matrix, the rows of the usual dim only."""
    import numpy as np  # here: only the embedding tier needs it, and it is ~50 ms of a proxy's start-up

    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    dims: dict[int, int] = {}
    for _, dim, _ in rows:
        dims[dim] = dims.get(dim, 0) + 1
    dim = max(dims, key=dims.__getitem__)  # one model has one dim; anything else is damage, skip it
    kept = [(i, bytes(b)) for i, d, b in rows if d == dim and len(b) == dim * 4]
    ids = np.fromiter((i for i, _ in kept), dtype=np.int64, count=len(kept))
    matrix = np.frombuffer(b"".join(b for _, b in kept), dtype=np.float32).reshape(len(kept), dim).copy()
    return ids, matrix
