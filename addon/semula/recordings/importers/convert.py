"""An imported exchange as the recording file the proxy would write for the same call, or why not.

The path is the proxy's, step by step (proxy/addon.py `_decide` and `_complete`): the host must be
intercepted, a side call is never recorded, the adapter canonicalises the request under the
folder's secrets key, the error policy and the stream's terminal event decide what is recorded,
`recording_of` redacts and fingerprints, `format.dumps` writes. Each file is then read back
through the loader's own `entry_from_file`, so nothing is written that the loader would skip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

from semula.core.request.canonical import CanonicalRequest
from semula.core.errorpolicy import unrecordable_answer
from semula.core.provenance import provenance_of
from semula.core.redact import FingerprintKey, redact_query, redact_text
from semula.core.settings import DEFAULT_PROJECT, AddonSettings, ProjectSettings
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, host_matches, side_call_for
from semula.providers.base import Adapter, AdapterError, RawRequest
from semula.providers.sse import split_frames
from semula.recordings.entry import Answer, recording_of, semula_version
from semula.recordings.files import max_file_bytes
from semula.recordings.folder import LOAD_ERRORS, claim, entry_from_file, recording_from_entry, relpath_of
from semula.recordings.format import RecordingFileError, dumps
from semula.recordings.importers.interaction import (
    MAX_BODY_BYTES,
    BadEntry,
    Interaction,
    Unreadable,
    decoded,
    folded,
    header,
    reason_of,
)
from semula.store.types import Entry, NewEntry


REQUEST_CAP = "the proxy's request body cap (semula_max_body_mb, --max-body-mb)"


@dataclass(frozen=True)
class ImportOptions:
    project: str = DEFAULT_PROJECT
    hosts: tuple[str, ...] = ()  # non-provider hosts to import too (`--hosts`)
    record_errors: bool = False  # as `semula_record_errors`
    sequence: bool = False  # repeats of one request become its 2nd, 3rd… answer (`semula_repeats=sequence`)
    # provider -> headers a request lacks that the SDK replaying it sends (`--header`): a tool that
    # filters `anthropic-*` headers (pydantic-ai's serializer) lost `anthropic-version`, which is matched
    fill_headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    max_file_bytes: int = field(default_factory=max_file_bytes)  # SEMULA_RECORDING_MAX_MB: bodies and files
    # the proxy's own request body cap (semula_max_body_mb): a body it would not match is not imported
    max_body_bytes: int = int(AddonSettings.max_body_mb * 2**20)


@dataclass(frozen=True)
class Planned:
    """A recording file to write: `rel` under the folder, `text` its content."""

    source: str
    rel: str
    text: str
    claim: str
    provider: str
    model: str | None
    status: int
    streamed: bool


@dataclass(frozen=True)
class Skipped:
    source: str
    reason: str
    failed: bool = False  # the entry is broken, hostile or over a cap (not a call the rules leave out)


def plan(items: Iterable[Interaction | Unreadable], options: ImportOptions, key: FingerprintKey,
         now: datetime | None = None) -> list[Planned | Skipped]:
    """Every item converted or skipped with its reason; a second exchange of one request is a duplicate
    (the first is kept, as a proxy in the default repeats mode keeps the first answer)."""
    out: list[Planned | Skipped] = []
    claims: dict[str, str] = {}
    repeats: dict[str, int] = {}
    now = now or datetime.now(UTC).replace(tzinfo=None)
    for item in items:
        if isinstance(item, Unreadable):
            out.append(Skipped(item.source, item.reason, failed=item.failed))
            continue
        result = convert(item, options, key, now)
        if isinstance(result, Planned) and (first := claims.setdefault(result.claim, result.source)) != result.source:
            if options.sequence:  # the n-th answer to one request, as `semula_repeats=sequence` records it
                repeats[result.claim] = n = repeats.get(result.claim, 1) + 1
                result = convert(item, options, key, now, occurrence=n)
            else:
                result = Skipped(result.source, f"duplicate: the same request as {first}, which is imported "
                                                "(--repeats sequence keeps each answer, in order)")
        out.append(result)
    return out


def convert(item: Interaction, options: ImportOptions, key: FingerprintKey, now: datetime,
            occurrence: int = 1) -> Planned | Skipped:
    try:
        return _convert(item, options, key, now, occurrence)
    except Exception as e:  # a cap (BadEntry), or a hostile entry's surprise (`https://[::1/`): its own loss only
        return Skipped(item.source, reason_of(e, "cannot be converted"), failed=True)


def _convert(item: Interaction, options: ImportOptions, key: FingerprintKey, now: datetime,
             occurrence: int) -> Planned | Skipped:
    url = urlsplit(item.url)
    host = (url.hostname or "").lower()
    if url.scheme not in ("http", "https") or not host:
        return Skipped(item.source, f"not an http(s) URL: {redact_text(item.url)[:80]}")
    if not host_matches(host, DEFAULT_PROVIDER_HOSTS + options.hosts):
        return Skipped(item.source, f"not a provider host: {host} (name it with --hosts to import it)")
    path = url.path or "/"
    if side_call_for(host, path) is not None:
        return Skipped(item.source, f"a side call ({path[:60]}), not a model call: the proxy never records one")
    body = decoded(item.request_body, header(item.request_headers, "content-encoding"),
                   min(options.max_file_bytes, options.max_body_bytes), REQUEST_CAP)
    raw = RawRequest(method=item.method, host=host, path=redact_text(path, key),
                     query=tuple(parse_qsl(url.query, keep_blank_values=True)),
                     headers={k.lower(): v for k, v in folded(item.request_headers)}, body=body)
    adapter = adapter_for(host, path)
    if missing := {k: v for k, v in options.fill_headers.get(adapter.name, {}).items() if k not in raw.headers}:
        raw = replace(raw, headers={**raw.headers, **missing})
    try:
        request = _canonicalise(adapter, raw, key)
    except AdapterError as e:
        return Skipped(item.source, f"bad request body: {e}")
    answer_body = decoded(item.response_body, header(item.response_headers, "content-encoding"), options.max_file_bytes)
    streamed = header(item.response_headers, "content-type").startswith("text/event-stream")
    frames = split_frames(answer_body) if streamed else []
    if why_not := unrecordable_answer(item.status, options.record_errors, answer_body, streamed,
                                      lambda: adapter.stream_complete(frames),
                                      header(item.response_headers, "location")):
        return Skipped(item.source, why_not.replace("--set semula_record_errors=true", "--record-errors"))
    answer = Answer(host=host, body=answer_body, status=item.status, headers=folded(item.response_headers),
                    streamed=streamed, upstream_ms=item.upstream_ms,
                    usage=adapter.usage_from_frames(frames) if streamed else adapter.usage_from_body(answer_body),
                    provenance=provenance_of(header(item.request_headers, "user-agent") or None, answer_body, streamed,
                                             semula_version()))
    new = recording_of(options.project, request, ProjectSettings(), answer, key=key, occurrence=occurrence)
    return _file(item.source, new, item.started_at or now, options, key)


def _canonicalise(adapter: Adapter, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
    """As proxy/addon.py `_canonicalise`: a body-less GET is kept for the exact tier only."""
    if not raw.body and raw.method in ("GET", "HEAD", "DELETE"):
        return CanonicalRequest(
            provider=adapter.name, method=raw.method, endpoint=raw.path,
            query=tuple(sorted(redact_query(raw.query, key))),
            headers=(), model=None, system=None, messages=(), tools=(), params={}, stream=False, body=None,
            parsed=False,
        )
    return adapter.canonicalise(raw, key)


def _file(source: str, new: NewEntry, recorded_at: datetime, options: ImportOptions,
          key: FingerprintKey) -> Planned | Skipped:
    entry = Entry.of(new, created_at=recorded_at)
    try:
        rel = relpath_of(entry)
        text = dumps(recording_from_entry(entry))
    except (RecordingFileError, ValueError, TypeError, RecursionError) as e:
        return Skipped(source, f"cannot be written as a recording: {e}", failed=True)
    if len(text.encode()) > options.max_file_bytes:
        return Skipped(source, f"the recording would be over the {options.max_file_bytes // 2**20} MB file cap "
                               "(SEMULA_RECORDING_MAX_MB)", failed=True)
    try:  # what the loader would make of it: a file it would skip is never written
        loaded = entry_from_file(text.encode(), lambda _project: ProjectSettings(), key)
    except LOAD_ERRORS as e:
        return Skipped(source, f"the loader would refuse it: {e}", failed=True)
    if claim(loaded) != claim(new):
        return Skipped(source, "the loader would read it as another request: not imported", failed=True)
    return Planned(source=source, rel=rel, text=text, claim=claim(new), provider=new.provider, model=new.model,
                   status=new.status, streamed=new.streamed)


__all__ = ["MAX_BODY_BYTES", "ImportOptions", "Planned", "Skipped", "convert", "plan"]
