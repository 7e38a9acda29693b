"""The named checks that say how a request differs from a recording, beyond its last user text.

One vocabulary for two readers: the near-match verdict (a recording whose shape differs is
never served; one of another provider, endpoint, stream mode or model is not even queued) and
the replay-miss explanation (which fields to look at). Each check takes (incoming, stored,
settings) and returns None or a reason such as "model differs: a → b".
Pure: plain values in, strings out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from semula.core.request.canonical import CanonicalRequest, canonical_json, context_fingerprint
from semula.core.jsondiff import first_difference
from semula.core.request.params import canonical_params
from semula.core.request.normalise import normalise_text, scrub_volatile
from semula.core.settings import ProjectSettings
from semula.core.text import shorten


def _tail_roles(c: CanonicalRequest, tail_n: int | None) -> tuple[str, ...]:
    roles = tuple(m.role for m in c.messages)
    return roles if tail_n is None else roles[max(len(roles) - max(tail_n, 0), 0) :]


def roles_differ(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    a, b = _tail_roles(stored, settings.tail_n), _tail_roles(incoming, settings.tail_n)
    if a == b:
        return None
    show = lambda roles: ",".join(roles[-12:]) or "none"  # noqa: E731
    return f"shape differs: roles {show(a)} → {show(b)}"


def _tool_names(tools: Iterable[Any]) -> dict[str, str]:
    """name -> canonical JSON of its definition, across the providers' tool shapes."""
    out: dict[str, str] = {}
    for n, tool in enumerate(tools):
        if isinstance(tool, Mapping) and isinstance(tool.get("functionDeclarations"), list):
            out.update(_tool_names(tool["functionDeclarations"]))
            continue
        inner = tool.get("function") if isinstance(tool, Mapping) else None
        inner = inner if isinstance(inner, Mapping) else tool
        name = inner.get("name") if isinstance(inner, Mapping) else None
        out[name if isinstance(name, str) else f"#{n}"] = canonical_json(tool)
    return out


def tools_differ(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    if stored.tools == incoming.tools or canonical_json(list(stored.tools)) == canonical_json(list(incoming.tools)):
        return None
    a, b = _tool_names(stored.tools), _tool_names(incoming.tools)
    changes = [f"+{n}" for n in b if n not in a] + [f"-{n}" for n in a if n not in b]
    changes += [f"{n} schema" for n in a if n in b and a[n] != b[n]]
    return "tools differ: " + (", ".join(changes) if changes else "order")


def _kept_params(c: CanonicalRequest, ignore: Sequence[str]) -> dict[str, Any]:
    """In the normalised fingerprint's form: 0 is 0.0, a documented default is left out."""
    return canonical_params(c.provider, c.endpoint, c.params, ignore, tools=bool(c.tools), model=c.model)


def params_differ(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    a, b = _kept_params(stored, settings.ignore_params), _kept_params(incoming, settings.ignore_params)
    if a == b and canonical_json(a) == canonical_json(b):  # == alone says 1 == 1.0 == True
        return None
    changes = []
    for key in sorted(k for k in a.keys() | b.keys() if canonical_json(a.get(k)) != canonical_json(b.get(k))):
        if key not in a:
            changes.append(f"{key}={short(b[key])} only in this request")
        elif key not in b:
            changes.append(f"{key}={short(a[key])} only in the recording")
        else:
            changes.append(f"{key} {short(a[key])} → {short(b[key])}")
    return "parameters differ: " + ", ".join(changes) if changes else None


def model_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    if (stored.provider, stored.endpoint, stored.model) == (incoming.provider, incoming.endpoint, incoming.model):
        return None
    if stored.model != incoming.model:
        return f"model differs: {stored.model} → {incoming.model}"
    return f"endpoint differs: {stored.provider} {stored.endpoint} → {incoming.provider} {incoming.endpoint}"


def context_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    """Everything but the last user text, normalised as the normalised fingerprint does, after tail_n."""
    patterns, ignore, tail_n = settings.scrub_patterns, settings.ignore_params, settings.tail_n
    keys = settings.scrub_keys
    if (context_fingerprint(incoming, patterns, ignore, tail_n, keys)
            == context_fingerprint(stored, patterns, ignore, tail_n, keys)):
        return None
    system = lambda c: normalise_text(scrub_volatile(c.system, patterns)) if c.system else None  # noqa: E731
    if system(incoming) != system(stored):
        return "context differs (system prompt)"
    return "context differs (earlier turns or tool results)"


@dataclass(frozen=True)
class Shape:
    """What a recorded answer's form depends on: who answers (provider), where (method and endpoint),
    how (one JSON body or a stream) and which model. An answer of one shape never serves, and is never
    queued for review against, a request of another: a client would get the wrong body format."""

    provider: str | None
    method: str | None
    endpoint: str | None
    stream: bool
    model: str | None

    @classmethod
    def of(cls, c: CanonicalRequest) -> Shape:
        return cls(c.provider, c.method, c.endpoint, bool(c.stream), c.model)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Shape:
        """From a stored canonical request (`CanonicalRequest.to_json`); missing fields read as None."""
        get = lambda key: d.get(key) if isinstance(d.get(key), str) else None  # noqa: E731
        return cls(get("provider"), get("method"), get("endpoint"), bool(d.get("stream")), get("model"))


def _stream_mode(stream: bool) -> str:
    return "stream" if stream else "non-stream"


def shapes_differ(incoming: Shape, stored: Shape) -> str | None:
    """The first of provider, endpoint, stream mode and model that differs, as "<field> differs: recorded → this"."""
    if incoming == stored:
        return None
    if incoming.provider != stored.provider:
        return f"provider differs: {stored.provider} → {incoming.provider}"
    if (incoming.method, incoming.endpoint) != (stored.method, stored.endpoint):
        return f"endpoint differs: {stored.method} {stored.endpoint} → {incoming.method} {incoming.endpoint}"
    if incoming.stream != stored.stream:
        return f"stream mode differs: {_stream_mode(stored.stream)} → {_stream_mode(incoming.stream)}"
    return f"model differs: {stored.model} → {incoming.model}"


def shape_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    """A near-match across shapes (provider, endpoint, stream mode, model) is neither served nor queued."""
    return shapes_differ(Shape.of(incoming), Shape.of(stored))


# shape first: its reason is the one a cross-shape near-match reports, and it rules out review too
SHAPE_CHECKS = (shape_differs, roles_differ, tools_differ, params_differ, model_differs, context_differs)


# ------------------------------------------------------------------ fields only a miss explanation reads
# A near-match compares conversations that already share their endpoint's query and headers;
# a replay miss may differ anywhere, so its explanation checks these too.


def stream_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    return None if incoming.stream == stored.stream else f"stream differs: {stored.stream} → {incoming.stream}"


def query_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    if incoming.query == stored.query:
        return None
    return f"query differs: {short(dict(stored.query))} → {short(dict(incoming.query))}"


def headers_differ(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    if incoming.headers == stored.headers:
        return None
    return f"headers differ: {short(dict(stored.headers))} → {short(dict(incoming.headers))}"


def system_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    if normalise_text(incoming.system or "") == normalise_text(stored.system or ""):
        return None
    return "context differs (system prompt)"


def messages_differ(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    """Each message whose text (or non-text parts) differ, with text shown around the first difference."""
    out = []
    for index, (a, b) in enumerate(zip(incoming.messages, stored.messages), start=1):
        if normalise_text(a.text) != normalise_text(b.text):
            mine, theirs = around_difference(a.text, b.text)
            out.append(f"message {index} ({a.role}) text differs: {theirs!r} → {mine!r}")
        elif canonical_json(list(a.parts)) != canonical_json(list(b.parts)):
            out.append(f"message {index} ({a.role}) non-text parts differ")
    return "; ".join(out) or None


def body_differs(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> str | None:
    """An unparsed (exact-only) body has no named fields: name the first JSON path that differs."""
    if incoming.parsed and stored.parsed:
        return None
    where = first_difference(stored.body, incoming.body)
    return None if where is None else f"body differs at {where}"


MISS_CHECKS = (model_differs, stream_differs, query_differs, headers_differ, params_differ, tools_differ,
               system_differs, roles_differ, messages_differ, body_differs)


def short(value: object, width: int = 40) -> str:
    """A value on one line, at most ``width`` characters: strings as they are, the rest as canonical JSON."""
    return shorten(value if isinstance(value, str) else canonical_json(value), width)


def around_difference(a: str, b: str, width: int = 40) -> tuple[str, str]:
    """Both texts shortened to a window around their first difference, so they never look equal."""
    a, b = " ".join(a.split()), " ".join(b.split())
    start = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    begin = max(0, start - width // 3)

    def window(text: str) -> str:
        piece = text[begin: begin + width]
        return ("…" if begin else "") + piece + ("…" if begin + width < len(text) else "")

    return window(a), window(b)
