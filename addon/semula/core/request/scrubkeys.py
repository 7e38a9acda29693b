"""`scrub_keys`: JSON keys whose values a project declares generated (`created_at`, `etag`...).

Their values are replaced by a placeholder in the normalised view of a request wherever they
appear: in JSON pasted into a message, in tool call arguments (objects, or JSON text as OpenAI
sends them) and in tool results. For agent tests whose tools return values made on each run.
Pure; the exact fingerprint and the stored request keep the values.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

__all__ = ["PLACEHOLDER", "scrub_keys_in_text", "scrub_keys_in_value"]

PLACEHOLDER = "<scrubbed>"
_DECODER = json.JSONDecoder()
MAX_TEXT = 1_000_000  # larger texts are left as they are (a miss costs a live call, not a wrong answer)


def scrub_keys_in_value(value: Any, keys: Collection[str]) -> Any:
    """A JSON value with the values of `keys` replaced, at any depth; strings may hold JSON."""
    if isinstance(value, dict):
        return {k: PLACEHOLDER if k in keys else scrub_keys_in_value(v, keys) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_keys_in_value(v, keys) for v in value]
    if isinstance(value, str):
        return scrub_keys_in_text(value, keys)
    return value


def scrub_keys_in_text(text: str, keys: Collection[str]) -> str:
    """Text with every JSON object or array in it scrubbed (and re-serialised) if it holds one of `keys`."""
    if not keys or len(text) > MAX_TEXT or not any(k in text for k in keys):
        return text
    out: list[str] = []
    start = 0
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            if isinstance(value, (dict, list)):
                out.append(text[start:i])
                out.append(json.dumps(scrub_keys_in_value(value, keys), ensure_ascii=False))
                start = i = end
                continue
        i += 1
    out.append(text[start:])
    return "".join(out)
