"""The upgrade that closes review candidates no longer allowed to be open (issue 21), for both stores.

Before issue 21 a near-match was queued whatever its shape: an Anthropic request against an
OpenAI chat recording, a streaming request against a non-stream one, and approving one gave the
client an answer of the wrong format. A store written then may hold such open candidates, and
the ones auto mode queued for requests it then recorded itself. The DuckDB and Postgres
migrations read the open candidates with their recordings in their own SQL and close what
`closures` says, each with the reason; only open candidates are touched, so running it again
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from semula.core.checks import Shape, shapes_differ

# Selects (candidate id, its request, its recording's request or NULL, a recording of the request's
# own or NULL) for every open candidate; both dialects accept it as written.
OPEN_CANDIDATES_SQL = """
    SELECT c.id, c.request_canonical, e.canonical,
           (SELECT min(o.id) FROM entries o
             WHERE o.project = c.project AND o.normalised_fp = c.request_normalised_fp AND o.id <> c.entry_id)
      FROM review_candidates c LEFT JOIN entries e ON e.id = c.entry_id
     WHERE c.status = 'open'
     ORDER BY c.id
"""


def _shape(text: str | None) -> Shape | None:
    try:
        value: Any = json.loads(text) if text else None
    except ValueError:
        return None
    return Shape.from_json(value) if isinstance(value, dict) else None


def closures(rows: Iterable[tuple[Any, ...]]) -> list[tuple[int, str]]:
    """(candidate id, why it is closed) for each open candidate that crosses a shape or whose request
    has a recording of its own; a candidate whose requests cannot be read is left as it is."""
    out = []
    for candidate_id, request, recorded, own in rows:
        incoming, stored = _shape(request), _shape(recorded)
        differs = shapes_differ(incoming, stored) if incoming is not None and stored is not None else None
        if differs is not None:
            out.append((int(candidate_id), f"closed on upgrade: {differs} (never queued across shapes)"))
        elif own is not None:
            out.append((int(candidate_id), f"closed on upgrade: the request has its own recording #{own} "
                                           "(an answered request closes its own)"))
    return out
