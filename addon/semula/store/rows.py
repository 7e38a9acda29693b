"""The stored rows both stores read back: their column lists and the values they become.

The DuckDB file and the Postgres server keep the same columns (JSON as text, so a stored
request keeps its key order), so one reading serves both.
"""

from __future__ import annotations

import json
from typing import Any

from semula.store.types import Entry

ENTRY_COLUMNS = (
    "id, project, provider, host, method, endpoint, model, request_fp, normalised_fp, canonical, "
    "last_text, status, headers, body, streamed, prompt_tokens, completion_tokens, upstream_ms, "
    "created_at, updated_at"
)
CANDIDATE_COLUMNS = (
    "id, project, tier, score, guard_reason, reason, request_fp, request_normalised_fp, request_canonical, "
    "request_text, entry_id, status, created_at, decided_at"
)
ENTRY_NAMES = [c.strip() for c in ENTRY_COLUMNS.split(",")]
_CANDIDATE_NAMES = [c.strip() for c in CANDIDATE_COLUMNS.split(",")]


def entry_from_row(row: tuple) -> Entry:
    values = dict(zip(ENTRY_NAMES, row))
    values["canonical"] = json.loads(values["canonical"])
    values["headers"] = [tuple(h) for h in json.loads(values["headers"])]
    values["body"] = bytes(values["body"]) if values["body"] is not None else b""
    return Entry(**values)


def candidate_from_row(row: tuple) -> dict[str, Any]:
    out = dict(zip(_CANDIDATE_NAMES, row))
    out["request_canonical"] = json.loads(out["request_canonical"])
    return out
