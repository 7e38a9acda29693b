"""Reading a request body's JSON the way every adapter needs it: one object, not too deep, real text,
lists where lists belong, integer token counts and the JSON of stream events.

Pure: bytes in, values out, errors that say why (`AdapterError` for a body that cannot be matched,
`NotJsonError` among them for one that is not a JSON object, `BodyShapeError` for an object of the
wrong shape). Imports only the SSE frame parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from semula.providers.sse import SSEEvent, parse_frame


class AdapterError(ValueError):
    """The request body cannot be canonicalised; the message says why."""


class NotJsonError(AdapterError):
    """The body is not a JSON object at all (not text, not JSON, a list): a body labelled JSON that is
    not is then matched by its bytes (`Adapter.canonicalise`), like any other non-JSON body."""


class BodyShapeError(Exception):
    """A JSON object that does not have the shape the endpoint expects.

    Adapters raise it while reading; :meth:`Adapter.canonicalise` then keeps
    the body for the exact tier only (``parsed=False``)."""


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# json.loads decodes bytes with "surrogatepass": a surrogate encoded in UTF-8 (ED A0..BF xx) is let through.
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


def _may_hold_surrogates(body: bytes) -> bool:
    """Cheap hints that the parsed value may hold a surrogate (which is not text and cannot be hashed)."""
    head = body[:4]
    utf16_or_32 = b"\x00" in head or head[:2] in (b"\xff\xfe", b"\xfe\xff")
    return utf16_or_32 or bool(_SURROGATE_ESCAPE.search(body)) or bool(_ENCODED_SURROGATE.search(body))


# Deeper than this is not matched: normalising walks the value recursively, and a body nested just under
# the interpreter's limit parsed fine but broke the fingerprint later (a RecursionError, an internal error).
MAX_DEPTH = 200


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def load_json_object(body: bytes) -> dict[str, Any]:
    """Parse a request body that must be a JSON object, or say why not."""
    if not body or not body.strip():
        raise NotJsonError("body is empty")
    try:
        value = json.loads(body)
    except RecursionError:
        raise AdapterError("body is nested too deeply to match") from None
    except UnicodeDecodeError as e:
        raise NotJsonError(f"body is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise NotJsonError(f"body is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise NotJsonError(f"body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise NotJsonError(f"body is a JSON {type(value).__name__ if value is not None else 'null'}, not an object")
    if nesting_depth(value) > MAX_DEPTH:
        raise AdapterError(f"body is nested too deeply to match (over {MAX_DEPTH} levels)")
    if _may_hold_surrogates(body):  # usually an escaped emoji (a pair); a lone half is not text
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise AdapterError("body holds a lone surrogate escape (like \\ud800), which is not text") from None
        except RecursionError:
            raise AdapterError("body is nested too deeply to match") from None
    return value


def as_int(value: Any) -> int | None:
    """An integer token count, or None for anything else (bools included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def frame_events(frames: Iterable[bytes]) -> list[SSEEvent]:
    return [parse_frame(f) for f in frames]


def event_json(event: SSEEvent) -> Any:
    """The event's data parsed as JSON, or None."""
    if not event.data or event.data == "[DONE]":
        return None
    try:
        return json.loads(event.data)
    except ValueError:
        return None


def require_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyShapeError(f"{what} is not a list")
    return value
