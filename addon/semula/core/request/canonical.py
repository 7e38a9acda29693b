"""The provider-neutral request and the fingerprints the cache looks up.

Provider adapters turn OpenAI, Anthropic and Gemini bodies into one
:class:`CanonicalRequest`; every matching tier then works on that value. The
exact fingerprint hashes the (redacted) body so that only byte-insignificant
differences (key order, whitespace, never-matters fields) are ignored. The
normalised fingerprint hashes normalised, scrubbed text instead, so requests
that differ only in form share it. The context fingerprint leaves out the
last user text for the near-match tiers, which compare that text separately.

Fingerprint contract, version 2 (``fp2:``, ``nfp2:``, ``cfp2:``): the hashed
request holds no secret. The adapter redacts each API key, JWT or bearer token
to ``[REDACTED:<tag>]``, the tag a truncated HMAC-SHA256 of the secret under
the store's salt (:class:`semula.core.redact.FingerprintKey`), so two different
secrets never share a fingerprint and the same secret always does (for one
salt). Version 1 redacted every secret to the same ``[REDACTED]``, so requests
that differed only in a secret collided; a store written under version 1 is
re-fingerprinted on open (``semula.engine.recordings.upgrade_fingerprints``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from semula.core.request.ignore import NO_IGNORE, IgnoreRules, Taken, ignore_in_value, ignore_text, strings_ignored
from semula.core.request.normalise import normalise_text, scrub_volatile
from semula.core.request.params import canonical_params
from semula.core.request.scrubkeys import scrub_keys_in_text, scrub_keys_in_value

__all__ = [
    "CONTEXT_PREFIX",
    "FINGERPRINT_VERSION",
    "NEVER_MATTERS",
    "NORMALISED_PREFIX",
    "CanonicalRequest",
    "Layout",
    "Message",
    "canonical_json",
    "content_layout",
    "ignored",
    "context_fingerprint",
    "joined_layout",
    "normalised_fingerprint",
    "request_fingerprint",
]

FINGERPRINT_VERSION = "fp2"
NORMALISED_PREFIX = "nfp2:"
CONTEXT_PREFIX = "cfp2:"

# Top-level body fields that never change the answer. They are left out of
# every fingerprint, of params and of the stored body.
NEVER_MATTERS: frozenset[str] = frozenset(
    {
        "user",  # OpenAI: end-user id for abuse monitoring
        "metadata",  # OpenAI/Anthropic: caller's tags (Anthropic's user_id); not sent to the model
        "safety_identifier",  # OpenAI: successor of `user`
        "prompt_cache_key",  # OpenAI: routing hint for prompt caching
        "prompt_cache_retention",  # OpenAI: how long the provider keeps the prompt cache
        "store",  # OpenAI: whether the provider keeps the completion for later retrieval
        "labels",  # Gemini (Vertex): billing labels
    }
)


def canonical_json(value: Any) -> str:
    """Serialise ``value`` in the one form every fingerprint hashes.

    This is a contract: sorted keys, compact separators, no ASCII escaping.
    Changing it changes every fingerprint, so bump ``FINGERPRINT_VERSION``
    (and ``NORMALISED_PREFIX``/``CONTEXT_PREFIX``) if it ever has to change:
    the engine re-fingerprints a store whose recorded version differs.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


# How a content list's parts sat before its text parts were joined into one text: one entry per part
# in order, a text part's length in the joined text (an int) or another part's kind (a str).
Layout = tuple[int | str, ...]


def content_layout(entries: Sequence[int | str]) -> Layout | None:
    """The layout to keep for a content list, or None when joining its texts lost nothing.

    A string, a list with one text part and a list of other parts only join to what they are,
    so they keep no layout (and their fingerprints stay as they were). Two text parts, or an
    empty list, do not: ``""``, ``["", ""]`` and ``[]`` all join to ``""``, and ``"a\nb"`` and
    ``["a", "b"]`` to ``"a\nb"``, yet they are different requests. The position of a lone text
    part among other parts is not kept: providers that care (Anthropic's tool_result first) say so.
    """
    texts = sum(1 for entry in entries if isinstance(entry, int))
    if entries and texts <= 1:
        return None
    return tuple(entries)


def joined_layout(layouts: Sequence[tuple[str, Layout | None]]) -> Layout | None:
    """The layout of texts joined from several messages (OpenAI's leading system messages): each
    message's own entries, a ``"message"`` mark between them; None for one message without one."""
    if len(layouts) == 1 and layouts[0][1] is None:
        return None
    out: list[int | str] = []
    for index, (text, layout) in enumerate(layouts):
        if index:
            out.append("message")
        out.extend(layout if layout is not None else (len(text),))
    return tuple(out)


@dataclass(frozen=True)
class Message:
    """One turn: its role, its text parts joined by newlines, and other parts.

    ``layout`` (see :func:`content_layout`) says how the parts sat when joining lost that."""

    role: str
    text: str
    parts: tuple[Any, ...] = ()
    layout: Layout | None = None


@dataclass(frozen=True)
class CanonicalRequest:
    """A provider request reduced to what can change the answer."""

    provider: str
    method: str
    endpoint: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    model: str | None
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[Any, ...]
    params: Mapping[str, Any]
    stream: bool
    body: Any
    parsed: bool = True
    # The Responses API's `instructions`, apart from `system` (a leading system message): the two
    # are different requests. None when absent, and then in neither the JSON nor any fingerprint.
    instructions: str | None = None
    # How `system` was joined from several texts (`content_layout`); None, and then in neither the
    # JSON nor any fingerprint, when it was one.
    system_layout: Layout | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for storage; :meth:`from_json` reverses it exactly."""
        return {
            "provider": self.provider,
            "method": self.method,
            "endpoint": self.endpoint,
            "query": [list(p) for p in self.query],
            "headers": [list(h) for h in self.headers],
            "model": self.model,
            "system": self.system,
            "messages": [_message_json(m) for m in self.messages],
            "tools": list(self.tools),
            "params": dict(self.params),
            "stream": self.stream,
            "body": self.body,
            "parsed": self.parsed,
            **({"instructions": self.instructions} if self.instructions is not None else {}),
            **({"system_layout": list(self.system_layout)} if self.system_layout is not None else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CanonicalRequest:
        return cls(
            provider=d["provider"],
            method=d["method"],
            endpoint=d["endpoint"],
            query=tuple((k, v) for k, v in d["query"]),
            headers=tuple((k, v) for k, v in d["headers"]),
            model=d["model"],
            system=d["system"],
            messages=tuple(
                Message(role=m["role"], text=m["text"], parts=tuple(m.get("parts", ())), layout=_layout(m.get("layout")))
                for m in d["messages"]
            ),
            tools=tuple(d["tools"]),
            params=dict(d["params"]),
            stream=bool(d["stream"]),
            body=d["body"],
            parsed=bool(d.get("parsed", True)),
            instructions=d.get("instructions"),
            system_layout=_layout(d.get("system_layout")),
        )

    def last_text(self) -> str:
        """Text of the last message that has text ('' if none)."""
        for m in reversed(self.messages):
            if m.text:
                return m.text
        return ""

    def last_user_text(self) -> str:
        """Text of the last user message that has text ('' if none)."""
        index = _last_user_index(self.messages)
        return self.messages[index].text if index is not None else ""


def _message_json(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "text": m.text, "parts": list(m.parts)}
    if m.layout is not None:
        out["layout"] = list(m.layout)
    return out


def _layout(value: Any) -> Layout | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(e, (int, str)) and not isinstance(e, bool)
                                                       for e in value):
        raise ValueError("layout is not a list of text lengths and part kinds")
    return tuple(value)


def _last_user_index(messages: Sequence[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and messages[i].text:
            return i
    return None


def _ignored_joined(text: str, layout: Layout | None, rules: IgnoreRules, taken: Taken | None
                    ) -> tuple[str, Layout | None]:
    """A joined text with the patterns applied to each of its parts (a match never spans two), its
    layout's lengths following; a layout whose lengths do not add up is kept, the text done whole."""
    if layout is None or not any(isinstance(entry, int) for entry in layout):
        return ignore_text(text, rules, taken), layout
    out: list[str] = []
    lengths: list[int | str] = []
    pos = 0
    for entry in layout:
        if isinstance(entry, str):
            lengths.append(entry)
            continue
        piece = ignore_text(text[pos : pos + entry], rules, taken)
        out.append(piece + text[pos + entry : pos + entry + 1])  # the separator after it, if any
        lengths.append(len(piece))
        pos += entry + 1
    if pos - 1 != len(text):
        return ignore_text(text, rules, taken), layout
    return "".join(out), tuple(lengths)


def ignored(c: CanonicalRequest, rules: IgnoreRules, taken: Taken | None = None, *, body: bool = True
            ) -> CanonicalRequest:
    """`c` as both fingerprints see it under the project's declared volatile fields (`core.request.ignore`):
    each path in the body and the parameters, each pattern in every text but the model. A path reaches
    only a body parameter (a key the adapter left in `params`), so both fingerprints drop the same values.
    `taken` collects the rules that changed something (the miss message and `semula eval` name them).
    `body=False` leaves the body as it is (the normalised view of a parsed request never reads it)."""
    if not rules:
        return c
    parameters = frozenset(c.params)
    if body:
        c = replace(c, body=_ignored_body(c, rules, taken))
    if not rules.patterns:
        return replace(c, params=ignore_in_value(c.params, rules, parameters, taken))
    system, system_layout = (None, c.system_layout) if c.system is None else _ignored_joined(
        c.system, c.system_layout, rules, taken)
    messages = []
    for m in c.messages:
        text, layout = _ignored_joined(m.text, m.layout, rules, taken)
        messages.append(Message(m.role, text, tuple(strings_ignored(list(m.parts), rules, taken)), layout))
    return replace(
        c, params=ignore_in_value(c.params, rules, parameters, taken), system=system,
        system_layout=system_layout, messages=tuple(messages), tools=tuple(strings_ignored(list(c.tools), rules, taken)),
        instructions=None if c.instructions is None else ignore_text(c.instructions, rules, taken))


def _ignored_body(c: CanonicalRequest, rules: IgnoreRules, taken: Taken | None = None) -> Any:
    """The body as the exact fingerprint sees it: each path of a body parameter, each pattern in every string
    but the model."""
    if not rules:
        return c.body
    if isinstance(c.body, Mapping):
        return ignore_in_value(c.body, rules, frozenset(c.params), taken, keep=frozenset({"model"}))
    return strings_ignored(c.body, rules, taken)


def request_fingerprint(c: CanonicalRequest, ignore: IgnoreRules = NO_IGNORE) -> str:
    """The exact tier's key: the redacted body (secrets as keyed tags) and the request line, key order
    aside; the project's declared volatile fields (`ignore`) as placeholders."""
    return f"{FINGERPRINT_VERSION}:" + _sha256(
        {
            "method": c.method,
            "provider": c.provider,
            "endpoint": c.endpoint,
            "query": [list(p) for p in c.query],
            "headers": [list(h) for h in c.headers],
            "body": _ignored_body(c, ignore),
        }
    )


def _norm(text: str | None, scrub_patterns: Sequence[str]) -> str | None:
    if text is None:
        return None
    return normalise_text(scrub_volatile(text, scrub_patterns))


def _norm_strings(value: Any, scrub_patterns: Sequence[str]) -> Any:
    """Normalise every string value (not key) in a part: tool arguments, results."""
    if isinstance(value, str):
        return _norm(value, scrub_patterns)
    if isinstance(value, dict):
        return {k: _norm_strings(v, scrub_patterns) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm_strings(v, scrub_patterns) for v in value]
    return value


def _params(c: CanonicalRequest, ignore_params: Sequence[str]) -> dict[str, Any]:
    """The parameters in canonical form (`core.request.params`), minus those the project ignores.

    Canonicalised here, not in the adapters: the stored canonical and the exact fingerprint
    stay faithful to the body as sent, and a stored request's normalised fingerprint can be
    recomputed when this form changes.
    """
    return canonical_params(c.provider, c.endpoint, c.params, ignore_params, tools=bool(c.tools), model=c.model)


def _layout_view(text: str, layout: Layout, keys: frozenset[str], scrub_patterns: Sequence[str]) -> list[Any]:
    """A joined text split back into its parts, each normalised on its own, with the other parts'
    kinds between them: so neither the count of parts nor where one ends folds away.

    The context fingerprint keeps it even for the last user text it otherwise leaves out: the near
    tiers score that text as one, which cannot see a word move from one part to another, so such a
    message is matched by the fingerprints (and queued for review), never served by score."""
    out: list[Any] = []
    pos = 0
    for entry in layout:
        if isinstance(entry, str):
            out.append(entry)
            continue
        piece = text[pos : pos + entry]
        pos += entry + 1
        out.append({"text": _norm(scrub_keys_in_text(piece, keys), scrub_patterns)})
    if pos and pos - 1 != len(text):  # a hand-edited recording whose lengths do not add up: keep it whole
        out.append({"unsplit": text})
    return out


def _tail(messages: tuple[Message, ...], tail_n: int | None) -> tuple[int, tuple[Message, ...]]:
    """The last ``tail_n`` messages and the index of the first of them."""
    if tail_n is None:
        return 0, messages
    start = max(len(messages) - max(tail_n, 0), 0)
    return start, messages[start:]


def _normalised_view(
    c: CanonicalRequest,
    scrub_patterns: Sequence[str],
    ignore_params: Sequence[str],
    drop_last_user_text: bool,
    tail_n: int | None,
    scrub_keys: Sequence[str] = (),
) -> dict[str, Any]:
    dropped = _last_user_index(c.messages) if drop_last_user_text else None
    start, kept = _tail(c.messages, tail_n)
    keys = frozenset(scrub_keys)
    messages = []
    for offset, m in enumerate(kept):
        text = (None if start + offset == dropped or m.layout is not None
                else _norm(scrub_keys_in_text(m.text, keys), scrub_patterns))
        parts = scrub_keys_in_value(m.parts, keys) if keys else m.parts
        view_message = {"role": m.role, "text": text, "parts": _norm_strings(parts, scrub_patterns)}
        if m.layout is not None:  # only then (its parts hold its text): other messages' fingerprints stay
            view_message["layout"] = _layout_view(m.text, m.layout, keys, scrub_patterns)
        messages.append(view_message)
    view = {
        "method": c.method,
        "provider": c.provider,
        "endpoint": c.endpoint,
        "query": [list(p) for p in c.query],
        "headers": [list(h) for h in c.headers],
        "model": c.model,
        "system": _norm(c.system, scrub_patterns) if c.system_layout is None else None,
        "messages": messages,
        "tools": list(c.tools),
        "params": _params(c, ignore_params),
        "stream": c.stream,
        "parsed": c.parsed,
        # A request no adapter understood has no messages to normalise; its
        # body is the only thing that tells two such requests apart.
        "body": None if c.parsed else c.body,
    }
    if c.instructions is not None:  # only then: the fingerprints of every other request stay as they were
        view["instructions"] = _norm(c.instructions, scrub_patterns)
    if c.system_layout is not None:
        view["system_layout"] = _layout_view(c.system or "", c.system_layout, frozenset(), scrub_patterns)
    return view


def normalised_fingerprint(
    c: CanonicalRequest,
    scrub_patterns: Sequence[str] = (),
    ignore_params: Sequence[str] = (),
    scrub_keys: Sequence[str] = (),
    ignore: IgnoreRules = NO_IGNORE,
) -> str:
    """The normalised tier's key: texts normalised and scrubbed (``scrub_keys``' JSON values
    too), params in canonical form minus ``ignore_params``, the declared volatile fields (``ignore``)
    as placeholders before any of that."""
    view = _normalised_view(ignored(c, ignore, body=not c.parsed), scrub_patterns, ignore_params, False, None, scrub_keys)
    return NORMALISED_PREFIX + _sha256(view)


def context_fingerprint(
    c: CanonicalRequest,
    scrub_patterns: Sequence[str] = (),
    ignore_params: Sequence[str] = (),
    tail_n: int | None = None,
    scrub_keys: Sequence[str] = (),
) -> str:
    """Everything the normalised fingerprint covers except the last user text.

    The near-match tiers compare that text by score and require the rest of
    the request to be the same; ``tail_n`` limits the history that counts.
    """
    return CONTEXT_PREFIX + _sha256(_normalised_view(c, scrub_patterns, ignore_params, True, tail_n, scrub_keys))
