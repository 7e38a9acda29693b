"""The one place a recording is assembled, from a live call or from a recording file."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.request.normalise import scrub_volatile
from semula.core.repeats import occurrence_of, sequenced
from semula.core.redact import FingerprintKey, clean_headers, clean_query, redact_bytes, redact_json, redact_text
from semula.core.settings import ProjectSettings
from semula.providers import redacted_answer
from semula.providers.base import Usage
from semula.store.types import NewEntry


@cache
def semula_version() -> str:
    """The installed semula's version, as recordings' provenance names it."""
    try:
        return metadata.version("semula")
    except metadata.PackageNotFoundError:
        return "unknown"


def searchable_text(request: CanonicalRequest, scrub_patterns: Sequence[str]) -> str:
    """What the lexical index holds for a recording: the text the near-match score compares."""
    return redact_text(scrub_volatile(request.last_user_text(), scrub_patterns))


def redacted_request(request: dict[str, Any], key: FingerprintKey | None) -> dict[str, Any]:
    """A stored request from a file, redacted as a live one is: every secret tagged under `key` (so it
    fingerprints as the live request carrying it does), credential headers and query parameters dropped."""
    out = redact_json(request, key)
    if isinstance(out.get("headers"), list):
        out["headers"] = [list(h) for h in clean_headers((h[0], h[1]) for h in out["headers"])]
    if isinstance(out.get("query"), list):
        out["query"] = [list(q) for q in clean_query((q[0], q[1]) for q in out["query"])]
    return out


def fingerprints_of(request: CanonicalRequest, settings: ProjectSettings) -> tuple[str, str]:
    """(request_fp, normalised_fp) as a recording keeps them; an unparsed request has only the exact one."""
    request_fp = request_fingerprint(request, settings.ignore)
    return request_fp, (normalised_fingerprint(request, *settings.fingerprint_inputs) if request.parsed else request_fp)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What came back for a request, as a recording keeps it (before redaction): from the upstream
    call, a recording file or a benchmark's synthetic answer."""

    host: str
    body: bytes
    status: int = 200
    headers: Iterable[tuple[str, str]] = (("content-type", "application/json"),)
    streamed: bool = False
    usage: Usage | None = None
    upstream_ms: float | None = None
    provenance: dict[str, str] | None = None  # `core.provenance.provenance_of`, or a file's (with recorded_at)


def recording_of(project: str, request: CanonicalRequest, settings: ProjectSettings, answer: Answer, *,
                 key: FingerprintKey | None = None, fingerprints: tuple[str, str | None] | None = None,
                 occurrence: int = 1) -> NewEntry:
    """The one place a recording is assembled: fingerprints, redaction and the searchable text.

    `key` is the one `request` was canonicalised under (the engine's, the recordings folder's): the
    answer's secrets get the same ``[REDACTED:<tag>]`` as the requests', so a follow-up request that
    echoes a replayed answer (a tool's result, a key the model wrote) fingerprints as the recorded one
    that carried the real secret. None: the plain ``[REDACTED]`` (what a loaded file's request got).

    `fingerprints` are (request_fp, normalised_fp) when the caller has them already (the proxy: a
    missing normalised one is computed). `occurrence` n ≥ 2 keys the n-th answer of a sequence
    (`semula_repeats=sequence`): fingerprints computed here get `#n`; fingerprints passed in already carry it.
    """
    request_fp, normalised_fp = fingerprints or (None, None)
    if request_fp is None or normalised_fp is None:
        n = max(occurrence, occurrence_of(request_fp) if request_fp else 1)
        computed = fingerprints_of(request, settings)
        request_fp = request_fp or sequenced(computed[0], n)
        normalised_fp = normalised_fp or sequenced(computed[1], n)
    usage = answer.usage or Usage()
    return NewEntry(
        project=project, provider=request.provider, host=answer.host, method=request.method,
        endpoint=request.endpoint, model=request.model, request_fp=request_fp,
        normalised_fp=normalised_fp, canonical=request.to_json(),
        last_text=searchable_text(request, settings.scrub_patterns),
        status=answer.status, headers=clean_headers(answer.headers),
        body=redacted_answer(answer.body, lambda b: redact_bytes(b, key)),
        streamed=answer.streamed, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        upstream_ms=answer.upstream_ms, provenance=answer.provenance,
    )
