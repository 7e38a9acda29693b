"""The recording file: one recorded call as pretty, reviewable JSON that people commit.

Pure: a store entry in, a JSON document out, and back. The envelope's keys are sorted and
the file ends with a newline (LF); the response body keeps its own key order and content, so
what is replayed is what was recorded. A JSON body is stored as JSON, an SSE body as its
frames in text (joined, they give back the exact bytes) plus a readable answer text, anything
else as base64; a body that is neither JSON nor SSE and larger than the sidecar threshold is a
reference to a sidecar file beside the recording (`sidecars`), never inlined. Fingerprints are
not stored: they are recomputed from the request on load, so a new fingerprint version never
strands old recordings.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from semula.core.settings import PROJECT_NAME
from semula.core.repeats import base_of, occurrence_of
from semula.core.request.canonical import CanonicalRequest
from semula.providers import PROVIDER_NAMES
from semula.providers.mcp import NAME as MCP_NAME
from semula.recordings import validate
from semula.recordings.eventframes import body_of_messages, payloads, readable_messages
from semula.recordings.sidecars import SidecarRef, ref_for
from semula.store.types import RecordedCall

FORMAT = "semula-recording/1"
SLUG_WORDS = 8
SLUG_CHARS = 48
_FRAME = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r)|.+\Z", re.S)
_SLUG_DROP = re.compile(r"[^a-z0-9]+")


class RecordingFileError(ValueError):
    """A recording file that cannot be loaded; the message names the line and the problem."""


@dataclass(frozen=True, kw_only=True)
class Recording(RecordedCall):
    """What a recording file holds: the call and its request (no fingerprints: they are recomputed from
    `request`), when it was recorded, and which answer of a sequence it is."""

    request: dict[str, Any]
    recorded_at: str | None
    occurrence: int = 1  # semula_repeats=sequence: the n-th answer to this request in a run


# ---------------------------------------------------------------- the file's path


def slug(text: str) -> str:
    """A short readable name from the prompt: ascii words, hyphenated."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    words = [w for w in _SLUG_DROP.split(folded) if w][:SLUG_WORDS]
    return "-".join(words)[:SLUG_CHARS].strip("-") or "request"


def relative_path(project: str, provider: str, endpoint: str, prompt: str, request_fp: str,
                  occurrence: int = 1) -> str:
    """project/provider/endpoint/prompt-slug-fingerprint.json: two different requests never share a file.

    Every part is a plain name: the project is validated, the provider is the adapter registry's,
    the endpoint and the prompt are slugged, so no file content picks a path outside the folder.

    The n-th answer of a sequence (n ≥ 2) is `...-fingerprint-n.json`, beside the first.
    """
    if provider not in PROVIDER_NAMES or not PROJECT_NAME.match(project):
        raise RecordingFileError(f"no recording path for project {project!r:.60} and provider {provider!r:.60}")
    endpoint_slug = _SLUG_DROP.sub("-", endpoint.lower()).strip("-") or "root"
    digest = hashlib.sha256(request_fp.encode()).hexdigest()[:12]
    suffix = f"-{occurrence}" if occurrence > 1 else ""
    return f"{project}/{provider}/{endpoint_slug}/{slug(prompt)}-{digest}{suffix}.json"


def request_path(project: str, request: CanonicalRequest, request_fp: str) -> str:
    """The file of this request's recording: under its endpoint, named by its prompt; an MCP call under its
    server and path, named by its method and tool (`providers/mcp.py` keeps them in `body` and `model`)."""
    endpoint, prompt = request.endpoint, request.last_user_text() or request.last_text()
    if request.provider == MCP_NAME and isinstance(request.body, dict):
        endpoint, prompt = f"{request.body.get('server')}{request.endpoint}", request.model or ""
    return relative_path(project, request.provider, endpoint, prompt, base_of(request_fp), occurrence_of(request_fp))


# ---------------------------------------------------------------- bodies


def _sse_frames(body: bytes) -> list[str] | None:
    frames = _FRAME.findall(body)
    try:
        texts = [frame.decode("utf-8") for frame in frames]
    except UnicodeDecodeError:
        return None
    return texts if "".join(texts).encode() == body else None


def _json_body(body: bytes) -> tuple[bool, Any]:
    duplicate = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicate
        out = dict(items)
        duplicate = duplicate or len(out) != len(items)
        return out

    try:
        value = json.loads(body.decode("utf-8"), object_pairs_hook=pairs)
    except (UnicodeDecodeError, ValueError):
        return False, None
    return (not duplicate and isinstance(value, (dict, list))), value


_TEXT_KEYS = ("content", "text")
_NESTED_KEYS = ("choices", "message", "delta", "content", "output", "candidates", "parts")


def _texts(value: Any) -> list[str]:
    """The answer text pieces of a provider's JSON answer or stream event (best effort, for reading)."""
    out: list[str] = []
    if isinstance(value, list):
        for item in value:
            out += _texts(item)
    elif isinstance(value, dict):
        if value.get("type") == "response.output_text.delta" and isinstance(value.get("delta"), str):
            return [value["delta"]]
        out += [value[key] for key in _TEXT_KEYS if isinstance(value.get(key), str)]
        for key in _NESTED_KEYS:
            if isinstance(value.get(key), (dict, list)):
                out += _texts(value[key])
    return out


def answer_text(body: bytes, frames: list[str] | None) -> str:
    if frames is None:
        ok, value = _json_body(body)
        return "".join(_texts(value)) if ok else ""
    pieces: list[str] = []
    for frame in frames:
        for line in frame.splitlines():
            if line.startswith("data:"):
                ok, value = _json_body(line[5:].strip().encode())
                if ok:
                    pieces += _texts(value)
    return "".join(pieces)


_LAYOUTS: dict[str, dict[str, Any]] = {"compact": {"separators": (",", ":")}, "spaced": {}, "indent2": {"indent": 2}}


def _layout(value: Any, body: bytes) -> str | None:
    """The json.dumps layout that gives back exactly these bytes, if any."""
    for name, options in _LAYOUTS.items():
        if json.dumps(value, ensure_ascii=False, **options).encode("utf-8") == body:
            return name
    return None


def body_fields(body: bytes, streamed: bool, sidecar_above: int | None = None) -> dict[str, Any]:
    """The response's body fields; `sidecar_above`: a non-JSON, non-SSE body larger than this many bytes
    becomes `body_sidecar`, a reference to its bytes (which the caller writes). An AWS event-stream
    body is `body_eventstream`, its messages readable (`eventframes.py`)."""
    # Event-stream first: its CRCs make a false match impossible, and binary frames can be valid UTF-8.
    if streamed and (messages := readable_messages(body)) is not None:
        return {"body_eventstream": messages, "answer_text": "".join(_texts(payloads(messages)))}
    ok, value = _json_body(body)
    # A stream endpoint's error answer is one JSON document (Gemini's 404 as text/event-stream): kept as JSON.
    if streamed and not ok and (frames := _sse_frames(body)) is not None:
        return {"body_sse": frames, "answer_text": answer_text(body, frames)}
    if ok and (layout := _layout(value, body)) is not None:
        return {"body_json": value, "body_layout": layout, "answer_text": answer_text(body, None)}
    if ok:  # JSON in another layout: keep its exact bytes, and show the answer
        return {"body_text": body.decode("utf-8"), "answer_text": answer_text(body, None)}
    if sidecar_above is not None and len(body) > sidecar_above:
        return {"body_sidecar": ref_for(body).to_json()}
    try:
        return {"body_text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(body).decode("ascii")}


def body_from(response: dict[str, Any], sidecar: Callable[[SidecarRef], bytes] | None = None) -> bytes:
    if "body_sidecar" in response:
        ref = SidecarRef.from_json(response["body_sidecar"], "response.body_sidecar")
        if sidecar is None:
            raise RecordingFileError(f"refers to sidecar {ref.file}, and was read without its folder")
        return sidecar(ref)
    if "body_eventstream" in response:
        return body_of_messages(response["body_eventstream"])
    if "body_sse" in response:
        return "".join(response["body_sse"]).encode("utf-8")
    if "body_json" in response:
        options = _LAYOUTS.get(response.get("body_layout", "compact"))
        if options is None:
            raise RecordingFileError(f"body_layout {response.get('body_layout')!r} is not one of {', '.join(_LAYOUTS)}")
        return json.dumps(response["body_json"], ensure_ascii=False, **options).encode("utf-8")
    if "body_text" in response:
        return response["body_text"].encode("utf-8")
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"], validate=True)
    raise RecordingFileError("response has no body_json, body_sse, body_eventstream, body_text or body_base64")


# ---------------------------------------------------------------- the document


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def dumps(recording: Recording) -> str:
    """The file's text: sorted envelope, the body as recorded (inline), LF line endings, a final newline."""
    return dumps_with_sidecars(recording, None)[0]


def dumps_with_sidecars(recording: Recording, sidecar_above: int | None) -> tuple[str, list[tuple[SidecarRef, bytes]]]:
    """The file's text, and the sidecars it refers to (written beside it, before it)."""
    response = {"status": recording.status, "headers": [f"{name}: {value}" for name, value in recording.headers]}
    body = body_fields(recording.body, recording.streamed, sidecar_above)
    sidecars = [(ref_for(recording.body), recording.body)] if "body_sidecar" in body else []
    envelope = _sorted({
        "format": FORMAT, "project": recording.project, "provider": recording.provider, "host": recording.host,
        "method": recording.method, "endpoint": recording.endpoint, "model": recording.model,
        "request": recording.request, "streamed": recording.streamed,
        "usage": {"prompt_tokens": recording.prompt_tokens, "completion_tokens": recording.completion_tokens},
        "upstream_ms": recording.upstream_ms, "recorded_at": recording.recorded_at,
        "response": {**response, "answer_text": body.get("answer_text")},
        **({"occurrence": recording.occurrence} if recording.occurrence > 1 else {}),
        **({"provenance": recording.provenance} if recording.provenance else {}),
    })
    # The body goes in last and unsorted: its key order is part of what was recorded.
    envelope["response"] = {**envelope["response"], **{k: v for k, v in body.items() if k != "answer_text"}}
    return json.dumps(envelope, ensure_ascii=False, indent=2) + "\n", sidecars


def _headers(lines: list[Any]) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        name, sep, value = str(line).partition(": ")
        if not sep:
            raise RecordingFileError(f"response header {line!r} is not 'name: value'")
        out.append((name, value))
    return out


_REQUIRED = ("project", "provider", "host", "method", "endpoint", "request", "response")


def parse(text: str) -> Any:
    """The JSON document of a recording file; a conflict marker or bad JSON raises RecordingFileError."""
    if (marker := re.search(r"^(<<<<<<<|=======|>>>>>>>)", text, re.M)) is not None:
        line = text.count("\n", 0, marker.start()) + 1
        raise RecordingFileError(f"line {line}: a git conflict marker ({marker.group(1)}): resolve the conflict")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordingFileError(f"line {e.lineno}: not JSON ({e.msg})") from None
    except RecursionError:
        raise RecordingFileError(f"nested deeper than {validate.MAX_DEPTH} levels") from None


def loads(text: str, providers: frozenset[str] | None = None,
          sidecar: Callable[[SidecarRef], bytes] | None = None) -> Recording:
    """Parse and validate a recording file; a bad file raises RecordingFileError naming the line or field
    and the problem. `providers`: the names a file's provider may take (default: the adapter registry's).
    `sidecar` reads a referenced sidecar's checked bytes (`sidecars.resolver`)."""
    data = parse(text)
    if not isinstance(data, dict):
        raise RecordingFileError("line 1: a recording is a JSON object")
    if data.get("format") != FORMAT:
        raise RecordingFileError(f"format {data.get('format')!r:.60} is not {FORMAT!r}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise RecordingFileError(f"missing field(s): {', '.join(missing)}")
    if (problem := validate.problem(data, PROVIDER_NAMES if providers is None else providers)) is not None:
        raise RecordingFileError(problem)
    response, usage = data["response"], data.get("usage") or {}
    try:
        body = body_from(response, sidecar)
    except (ValueError, TypeError, RecursionError) as e:
        raise RecordingFileError(f"response body: {e}") from None
    return Recording(
        project=data["project"], provider=data["provider"], host=data["host"],
        method=data["method"], endpoint=data["endpoint"], model=data.get("model"),
        request=data["request"], status=response["status"],
        headers=_headers(response.get("headers") or []), body=body,
        streamed=bool(data.get("streamed")), prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"), upstream_ms=data.get("upstream_ms"),
        recorded_at=data.get("recorded_at"), occurrence=data.get("occurrence", 1),
        provenance=data.get("provenance") or None,
    )
