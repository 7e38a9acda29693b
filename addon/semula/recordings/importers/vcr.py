"""VCR cassettes: vcrpy and pytest-recording YAML, vcrpy's JSON serializer, pydantic-ai's body serializer.

The layouts met in the wild:
- vcrpy ≥ 2: `interactions: [{request: {method, uri, body, headers: {name: [values]}},
  response: {status: {code, message}, headers, body: {string}}}]`, bodies as text or `!!binary`;
- older httpx cassettes: `response: {status_code, headers, content}`;
- pydantic-ai's serializer: a JSON body stored parsed under `parsed_body` (re-dumped here with
  `json.dumps`, as its `deserialize` gives it to the client).
YAML is read with `safe_load`: a `!!python/object` tag is an error, never code. Its anchors and aliases
stay shared when loaded, and would be copied out when a body is dumped: a 1 KB cassette of nested
aliases (a "billion laughs") holds billions of nodes. The loaded document's expanded size is counted
first, each shared node once, and a cassette over its budget is refused before anything is expanded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from semula.recordings.files import max_file_bytes
from semula.recordings.importers.interaction import (BadEntry, Interaction, Unreadable, body_bytes, each_entry,
                                                    header_pairs)


def read(path: Path, data: bytes) -> Iterator[Interaction | Unreadable]:
    """The interactions of one cassette file (`data` its bytes)."""
    try:
        cassette = _load(path, data)
    except BadEntry as e:
        yield Unreadable(str(path), str(e))
        return
    interactions = cassette.get("interactions") if isinstance(cassette, dict) else None
    if not isinstance(interactions, list):
        yield Unreadable(str(path), "not a VCR cassette: no `interactions` list", failed=False)
        return
    yield from each_entry(str(path), interactions, interaction)


def _load(path: Path, data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadEntry("not UTF-8 text: a cassette is YAML or JSON") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as e:
            raise BadEntry(f"not JSON: {e}") from None
    try:
        document = _safe_yaml(text)
    except RecursionError:
        raise BadEntry("not YAML: nested too deeply") from None
    except Exception as e:  # each YAML library's own error types
        raise BadEntry(f"not YAML: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    budget = expansion_budget(len(data))
    try:
        over = expanded_size(document, budget) > budget
    except RecursionError:
        raise BadEntry("not YAML: nested too deeply") from None
    if over:
        raise BadEntry(f"its YAML aliases expand past {budget:,} nodes and characters ({len(data):,} bytes "
                       "of file): an alias bomb, not a cassette")
    return document


def expansion_budget(file_bytes: int) -> int:
    """Room for a cassette's honest reuse of anchors (one body shared by two interactions) on top
    of its own size; never more than a recording file may hold."""
    return 2 * file_bytes + min(max_file_bytes(), 64 * 2**20)


def expanded_size(document: Any, budget: int) -> int:
    """Nodes plus characters of `document` once every alias is copied out, counted without copying:
    each shared node is measured once (memoised by identity), and counting stops past `budget`.
    A cycle (an alias inside its own anchor) has no size: it counts as over any budget."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: Any) -> int:
        if isinstance(node, (str, bytes)):
            return 1 + len(node)
        if not isinstance(node, (dict, list)):
            return 1
        if (known := sizes.get(id(node))) is not None:
            return known
        if id(node) in busy:
            return budget + 1
        busy.add(id(node))
        total = 1
        for child in (child for pair in node.items() for child in pair) if isinstance(node, dict) else node:
            total += size(child)
            if total > budget:
                break
        busy.discard(id(node))
        sizes[id(node)] = total = min(total, budget + 1)
        return total

    return size(document)


def _safe_yaml(text: str) -> Any:
    """PyYAML's safe loader (vcrpy's own dependency), else ruamel.yaml's (mitmproxy's), never a full loader."""
    try:
        import yaml
    except ImportError:
        from ruamel.yaml import YAML

        return YAML(typ="safe", pure=True).load(text)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def interaction(source: str, item: Any) -> Interaction:
    if not isinstance(item, dict) or not isinstance(item.get("request"), dict) or not isinstance(
            item.get("response"), dict):
        raise BadEntry("not an interaction: no request and response mappings")
    request, response = item["request"], item["response"]
    method, uri = request.get("method"), request.get("uri") or request.get("url")
    if not isinstance(method, str) or not isinstance(uri, str):
        raise BadEntry("the request has no method or uri")
    return Interaction(
        source=source, method=method.upper(), url=uri,
        request_headers=header_pairs(request.get("headers")), request_body=_request_body(request),
        status=_status(response), response_headers=header_pairs(response.get("headers")),
        response_body=_response_body(response),
    )


def _status(response: dict[str, Any]) -> int:
    status = response.get("status", response.get("status_code"))
    if isinstance(status, dict):
        status = status.get("code")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise BadEntry(f"the response status {status!r:.40} is not an HTTP status")
    return status


def _request_body(request: dict[str, Any]) -> bytes:
    if "parsed_body" in request:  # pydantic-ai
        return _dumped(request["parsed_body"])
    body = request.get("body")
    if isinstance(body, dict) and "string" in body:
        body = body["string"]
    return body_bytes(body, "the request body")


def _response_body(response: dict[str, Any]) -> bytes:
    if "parsed_body" in response:  # pydantic-ai
        return _dumped(response["parsed_body"])
    if "content" in response and "body" not in response:  # vcrpy's older httpx layout
        return body_bytes(response["content"], "the response content")
    body = response.get("body")
    if isinstance(body, dict):
        body = body.get("string")
    return body_bytes(body, "the response body")


def _dumped(value: Any) -> bytes:
    try:
        return json.dumps(value).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as e:
        raise BadEntry(f"parsed_body cannot be written back as JSON: {e}") from None
