"""The raw-request fast path's map: raw request digest → the certain-tier hit it had.

The rules (what the key covers, when a hit may be remembered, when it still stands) are pure, in
`semula.core.fasthit`; this is the edge that hashes a live mitmproxy request and keeps the map.
The map is bounded by a count (least recently used out) and belongs to one open store: its
fingerprints are salted by that store's key, so it is emptied when the engine changes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from mitmproxy import http

from semula.core.cascade import Outcome
from semula.core.fasthit import FastHit, FastKey, fast_key, fast_path_off, recorded, remember, still_stands
from semula.core.modes import Mode
from semula.core.redact import clean_query
from semula.core.settings import AddonSettings, ProjectSettings
from semula.engine.engine import Engine
from semula.providers import ADAPTERS, GENERIC
from semula.proxy.call.flowstate import FlowState, raw_request
from semula.proxy.call.identity import keyed_project

# The canonical path parses larger bodies off the event loop; they are not worth a fast path.
FAST_BODY_BYTES = 256 * 1024
# ~0.45 KB each (key, fingerprint, the match, the map's slot; measured with tracemalloc): at most ~15 MB.
FAST_PATH_ENTRIES = 32_768
FAST_ENTRY_BYTES = 450
# Every header any adapter reads: keying on all of them is never less strict than the adapter's own.
BEHAVIOUR_HEADERS = frozenset(h.lower().encode() for a in (*ADAPTERS, GENERIC) for h in a.behaviour_headers)


def request_key(project: str, host: str, path: str, request: http.Request,
                behaviour: dict[bytes, list[bytes]]) -> FastKey:
    """The fast-path key of a live request (its body must not be content-encoded)."""
    query = clean_query(request.query.fields) if "?" in request.path else ()
    headers = tuple(sorted((key.decode("latin-1"), tuple(v.decode("latin-1") for v in values))
                           for key, values in behaviour.items()))
    return fast_key(project, request.method.upper(), host, path, query, headers, request.raw_content or b"")


def scan_headers(headers: http.Headers) -> tuple[dict[bytes, list[bytes]], str]:
    """One pass over the raw fields: the behaviour headers (every value, in order) and the content encoding."""
    behaviour: dict[bytes, list[bytes]] = {}
    encoding = ""
    for name, value in headers.fields:
        key = name.lower()
        if key in BEHAVIOUR_HEADERS:
            behaviour.setdefault(key, []).append(value)
        elif key == b"content-encoding":
            encoding += value.decode("latin-1")
    return behaviour, encoding


class Found(NamedTuple):
    key: FastKey
    project: str  # with the API key hash when `namespace_by_key` is on
    settings: ProjectSettings
    hit: FastHit


class FastPath:
    """The bounded map, with counters for the status line and the benchmark."""

    def __init__(self, max_entries: int = FAST_PATH_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._hits: OrderedDict[FastKey, FastHit] = OrderedDict()
        self._owner: object | None = None  # the engine whose fingerprints the map holds
        self.max_entries = max_entries
        self.served = 0
        self.stale = 0

    def find(self, engine: Engine, mode: Mode, settings: AddonSettings, request: http.Request,
             state: FlowState) -> Found | None:
        """A remembered hit that still stands for this request; notes `state.fast_key` when it may have one."""
        cap = min(FAST_BODY_BYTES, int(settings.max_body_mb * 2**20))
        behaviour, encoding = scan_headers(request.headers)
        if fast_path_off(mode, no_cache=state.no_cache, sequence_repeats=settings.repeats == "sequence",
                         content_encoding=encoding, body_bytes=len(request.raw_content or b""), max_body_bytes=cap):
            return None
        project = state.project
        if settings.namespace_by_key:
            project = keyed_project(project, raw_request(request, state, b""), True)
        state.fast_key = key = request_key(project, state.host, state.path, request, behaviour)
        hit = self.get(engine, key)
        if hit is None:
            return None
        current = engine.settings_for(project)
        if not still_stands(hit, engine.match(project, hit.request_fp, hit.normalised_fp), current.fingerprint_inputs):
            self.forget(key)
            return None
        return Found(key, project, current, hit)

    def remember(self, engine: Engine, mode: Mode, state: FlowState, outcome: Outcome) -> None:
        """After the canonical tiers decided: remember a certain-tier hit for this raw request."""
        if state.fast_key is not None and state.canonical is not None and (hit := remember(
                mode, outcome, state.canonical.provider, state.canonical.model, state.settings.fingerprint_inputs)):
            self.put(engine, state.fast_key, hit)

    def recorded(self, engine: Engine, mode: Mode, state: FlowState, entry_id: int) -> None:
        """After this request's answer was recorded: its repeats are exact hits on the new entry."""
        if state.fast_key is not None and state.canonical is not None and state.outcome is not None and (hit := recorded(
                mode, state.outcome, entry_id, state.canonical.provider, state.canonical.model,
                state.settings.fingerprint_inputs)):
            self.put(engine, state.fast_key, hit)

    def get(self, owner: object, key: FastKey) -> FastHit | None:
        with self._lock:
            if owner is not self._owner:
                return None
            hit = self._hits.get(key)
            if hit is not None:
                self._hits.move_to_end(key)
            return hit

    def put(self, owner: object, key: FastKey, hit: FastHit) -> None:
        with self._lock:
            if owner is not self._owner:
                self._hits.clear()
                self._owner = owner
            self._hits[key] = hit
            self._hits.move_to_end(key)
            while len(self._hits) > self.max_entries:
                self._hits.popitem(last=False)

    def forget(self, key: FastKey) -> None:
        with self._lock:
            if self._hits.pop(key, None) is not None:
                self.stale += 1

    def __len__(self) -> int:
        return len(self._hits)

    def nbytes(self) -> int:
        """About what the map holds: it fills up to `FAST_PATH_ENTRIES` as new requests are recorded or hit."""
        return len(self) * FAST_ENTRY_BYTES
