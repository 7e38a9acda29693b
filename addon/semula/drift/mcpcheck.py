"""`semula drift` for MCP recordings: each sent to its registered server, one session per server, the answers compared.

What is compared is the JSON-RPC response without its `id` (a fresh one each time): its `result` (or
`error`) by JSON path as model answers are, and by value, since a server's tool answers what it is asked.
The answer text of the report is the result's text parts (a tool's `content`, a resource's `contents`, a
prompt's messages), else the result as JSON. Both sides are redacted as a recording is, under the
folder's key, so a secret in an unchanged answer compares equal; nothing drift prints holds one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from semula.core.redact import FingerprintKey, redact_bytes, redact_text
from semula.drift import compare
from semula.drift.mcpsend import (Exchange, McpTarget, Registered, Reply, TooBig, call_of, content_type,
                                  target_of, wire_of)
from semula.drift.select import Selected
from semula.drift.send import Live, NotSent
from semula.providers import KeyAuth, auth_for, redacted_answer
from semula.providers.mcp import NAME as MCP_NAME
from semula.providers.mcpwire import response_of, result_text


@dataclass(frozen=True)
class McpOptions:
    servers: tuple[Registered, ...] = ()  # --mcp-server: the only servers an MCP recording is sent to
    headers: tuple[tuple[str, str], ...] = ()  # the servers' credentials (credentials_of); never printed


@dataclass
class Checked:
    outcome: str  # same, drifted, skipped, error
    reason: str = ""
    drift: compare.Drift | None = None
    live: Live | None = None  # the live answer, for --update


def credentials_of(environ: Mapping[str, str], headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """What goes to the registered MCP servers: `--mcp-header`s, and the MCP adapter's token variable
    ($SEMULA_MCP_TOKEN as a bearer token) unless a header already carries that name. None: none."""
    auth = auth_for(MCP_NAME)
    out = list(headers)
    if isinstance(auth, KeyAuth) and not any(name.lower() == auth.header for name, _ in headers):
        token = next((v.strip() for name in auth.env if (v := environ.get(name, "")).strip()), None)
        if token:
            out.append((auth.header, auth.template.format(token)))
    return tuple(out)


def check_mcp(items: list[Selected], client: httpx.Client, options: McpOptions, key: FingerprintKey | None,
              cap: int, min_similarity: float) -> dict[str, Checked]:
    """Each MCP recording's outcome by file. Nothing goes to a server that is not in `options.servers`."""
    out: dict[str, Checked] = {}
    groups: dict[tuple[str, str], tuple[McpTarget, list[Selected]]] = {}
    for item in items:
        try:
            target = target_of(item.recording, options.servers)
        except NotSent as e:
            out[item.rel] = Checked("skipped", str(e))
            continue
        wire = wire_of(item.recording)
        groups.setdefault((target.url, wire), (target, []))[1].append(item)
    for (_, wire), (target, members) in groups.items():
        server = _Server(client, target, wire, options.headers, cap, key, min_similarity)
        openings = [m for m in members if call_of(m.recording)[0] == "initialize"]
        # In the order they were recorded: a server with state answers a call after the ones before it.
        calls = sorted((m for m in members if call_of(m.recording)[0] != "initialize"),
                       key=lambda m: (m.recording.recorded_at or "", m.recording.occurrence, m.rel))
        # The first recorded initialize opens the session the calls use; another is checked in its own.
        out.update(server.session(openings[0] if openings else None, calls))
        for opening in openings[1:]:
            out.update(server.session(opening, []))
    return out


class _Server:
    def __init__(self, client: httpx.Client, target: McpTarget, wire: str, headers: tuple[tuple[str, str], ...],
                 cap: int, key: FingerprintKey | None, min_similarity: float) -> None:
        self.client, self.target, self.wire, self.headers, self.cap = client, target, wire, headers, cap
        self.key, self.min_similarity = key, min_similarity

    def session(self, opening: Selected | None, calls: list[Selected]) -> dict[str, Checked]:
        out: dict[str, Checked] = {}
        exchange = Exchange(self.client, self.target, self.wire, self.headers, self.cap)
        try:
            try:
                reply = exchange.open(call_of(opening.recording)[1] if opening else None)
            except (httpx.HTTPError, TooBig) as e:
                return {item.rel: Checked("error", _failure(e)) for item in [*([opening] if opening else []), *calls]}
            if opening is not None and reply is not None:
                out[opening.rel] = self._compared(opening, reply)
            if not exchange.opened:
                assert reply is not None  # only the handshake wire can fail to open
                why = f"the session did not open: {self._refusal(reply.live, 'initialize')}"
                out.update({item.rel: Checked("error", why) for item in calls})
                return out
            for item in calls:
                try:
                    out[item.rel] = self._compared(item, exchange.call(*call_of(item.recording)))
                except (httpx.HTTPError, TooBig) as e:
                    out[item.rel] = Checked("error", _failure(e))
        finally:
            exchange.close()
        return out

    def _compared(self, item: Selected, reply: Reply) -> Checked:
        recording, live = item.recording, reply.live
        recorded = response_of(recording.body, content_type(recording.headers))
        body = redacted_answer(live.body, lambda b: redact_bytes(b, self.key))
        answered = response_of(body, content_type(live.headers), reply.request_id)
        drift = compare.compare(_answer(recording.status, recorded), _answer(live.status, answered),
                                self.min_similarity, exact=True)
        reason = ""
        if live.status >= 300 or answered is None:
            reason = self._refusal(live, call_of(recording)[0])
        return Checked("drifted" if drift.drifted else "same", reason, drift, live)

    def _refusal(self, live: Live, method: str) -> str:
        """Why a server gave no answer to compare, in one line (401: whether credentials went with it)."""
        if live.status == 401:
            return ("the server answered 401 to the credentials sent" if self.headers else
                    "the server answered 401 and drift sent no credentials (set $SEMULA_MCP_TOKEN, or "
                    "--mcp-header NAME:VALUE)")
        message = response_of(live.body, content_type(live.headers))
        error = message.get("error") if message else None
        said = error.get("message") if isinstance(error, dict) else None
        detail = f": {redact_text(said)[:160]}" if isinstance(said, str) else ""
        if live.status >= 300:
            return f"{self.target.server} answered {method} with HTTP {live.status}{detail}"
        return f"{self.target.server} answered {method} with a JSON-RPC error{detail}" if detail else (
            f"no JSON-RPC response to {method} in {self.target.server}'s answer")


def _answer(status: int, message: dict[str, Any] | None) -> compare.Answer:
    """A response as drift compares it: its `result` or `error` (never its id), and its text."""
    kept = {k: message[k] for k in ("result", "error") if k in message} if message else None
    if kept is None:
        return compare.Answer(status=status, body=b"", streamed=False)
    as_json = json.dumps(kept, sort_keys=True, ensure_ascii=False)
    text = result_text(kept.get("result")) or as_json
    return compare.Answer(status=status, body=as_json.encode("utf-8"), streamed=False, text=redact_text(text))


def _failure(e: Exception) -> str:
    return redact_text(f"{type(e).__name__}: {e}" if isinstance(e, httpx.HTTPError) else str(e))[:200]

