"""Derived data kept in step with the code that derives it, when a store is opened.

A recording stores its request as sent (the canonical JSON); the normalised fingerprint and the
searchable text are derived from it. When the derivation changes, a store written by an older
version is brought up to date here, once, from the stored requests: the versions it was
derived with are kept in the store's `meta` table. Runs on the store thread, before the indexes load.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from semula.core.request.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings, settings_from_mapping, settings_in
from semula.recordings.entry import searchable_text
from semula.store.base import RecordingStore, each_canonical

log = logging.getLogger("semula")

# Bump when `normalised_fingerprint`'s view of a request changes, so stored fingerprints are
# recomputed. 2: parameters in canonical form (core.request.params). 3: all-digit request/trace ids and
# the values of id keys (request_id: 12345678) are scrubbed. 4: Vertex's Gemini and Anthropic bodies
# get their providers' parameter rules (now declared by the adapters: `Adapter.param_rules`); more documented defaults
# (service_tier, response_format, tool_choice, responseMimeType) and a top-level null as unset.
# 5: a message's content layout (several text parts), max_tokens = max_completion_tokens on OpenAI's
# non-reasoning chat models, a Markdown list re-indented as a whole, a lower-case lead-in line as prose.
NORMALISED_VIEW = "5"
# Bump when `searchable_text` changes. 2: the last user text (was: the last text of any role).
SEARCHABLE_TEXT = "2"
BATCH = 1000


def upgrade(store: RecordingStore, refingerprint: Callable[[str, ProjectSettings], int]) -> dict[str, int]:
    """Recompute what an older version derived differently; returns what changed, by kind."""
    done: dict[str, int] = {}
    settings = {p: settings_from_mapping(v) for p, v in store.all_project_settings().items()}
    if store.meta("searchable_text") != SEARCHABLE_TEXT:
        done["searchable_text"] = _reindex_texts(store, settings)
        store.set_meta("searchable_text", SEARCHABLE_TEXT)
    if store.meta("normalised_view") != NORMALISED_VIEW:
        done["normalised_fp"] = sum(refingerprint(p, settings_in(settings, p)) for p in store.projects())
        store.set_meta("normalised_view", NORMALISED_VIEW)
    if any(done.values()):
        log.info("semula: brought the store up to date: %s", done)
    return done


def _reindex_texts(store: RecordingStore, settings: dict[str, ProjectSettings]) -> int:
    changed = 0
    updates: list[tuple[int, str]] = []
    for entry_id, project, canonical in each_canonical(store):
        request = CanonicalRequest.from_json(canonical)
        updates.append((entry_id, searchable_text(request, settings_in(settings, project).scrub_patterns)))
        if len(updates) == BATCH:
            store.set_last_texts(updates)
            changed, updates = changed + len(updates), []
    if updates:
        store.set_last_texts(updates)
    return changed + len(updates)
