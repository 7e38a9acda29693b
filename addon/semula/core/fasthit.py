"""The raw-request fast path: the rules that let a repeat of the same bytes skip parsing.

Replay in CI sends the same request bytes again and again. The canonical tiers parse the JSON
body, redact it, and hash two fingerprints before their dictionary lookup; for a request whose
raw form was already seen and matched, all of that gives the same fingerprints again. The fast
path remembers, under a digest of everything the canonical request is built from, the
fingerprints the cascade looked up and the match it found, and replays that lookup.

Why it never serves what the canonical tiers would not:
- The key covers every input of the canonical request and of the lookup: the project (with the
  API key hash when `namespace_by_key` is on), the method, host, path, the query without its
  secret parameters, every header an adapter reads (`behaviour_headers`, all values) and the
  body bytes. Same key, same canonical request, same fingerprints (for one store salt: the map
  lives as long as one open store).
- It is filled only from a certain-tier hit (exact, normalised, alias) of the first occurrence
  (never a near tier, a bypass, the ordered-repeats mode, or record/passthrough mode).
- Before each fast hit the remembered lookup is run again on the live index (`certain(project,
  request_fp, normalised_fp)`, the very call the cascade made) and must find the same tier and
  entry, and the project's fingerprint inputs must be unchanged (its `ignore` feeds the exact
  fingerprint too, so this holds for an exact hit as well).
  A deleted or re-recorded entry, a removed alias, a new exact recording that now shadows a
  normalised hit, a settings change: each makes the check fail, and the request falls through
  to the canonical tiers (which refill the map). So no invalidation message has to reach it.

Pure: plain values in and out; the map and the hashing of a live request are at the edge
(`semula.proxy.call.fastpath`).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from semula.core.cascade import Outcome
from semula.core.decision import Match, decide
from semula.core.modes import Mode
from semula.core.tiers import CERTAIN, Tier

FAST_TIERS = frozenset(CERTAIN)
FAST_MODES = frozenset({Mode.AUTO, Mode.REPLAY})

FastKey = tuple[str, bytes]  # (project, digest of the raw request)
FingerprintInputs = tuple[object, ...]  # `ProjectSettings.fingerprint_inputs`


@dataclass(frozen=True, slots=True)
class FastHit:
    """What a certain-tier hit found for one raw request: enough to redo its lookup and log it."""

    match: Match
    request_fp: str
    normalised_fp: str | None  # as the cascade looked it up: None when the exact tier answered first
    fingerprint_inputs: FingerprintInputs  # the project's, when the fingerprints were computed
    provider: str
    model: str | None


def fast_key(project: str, method: str, host: str, path: str, query: Sequence[tuple[str, str]],
             headers: Sequence[tuple[str, tuple[str, ...]]], body: bytes) -> FastKey:
    """The key of a raw request. `query` must already be without secret parameters; `headers` are the
    behaviour headers as (lower-case name, every value). The digest keeps no secret in memory."""
    head = repr((method, host, path, tuple(query), tuple(headers))).encode("utf-8", "backslashreplace")
    digest = hashlib.blake2b(head, digest_size=20)
    digest.update(b"\x00")
    digest.update(body)
    return project, digest.digest()


def fast_path_off(mode: Mode, *, no_cache: bool, sequence_repeats: bool, content_encoding: str,
                  body_bytes: int, max_body_bytes: int) -> str | None:
    """Why this request may not use the fast path (None: it may)."""
    if mode not in FAST_MODES:
        return f"{mode.value} mode"
    if no_cache:
        return "bypass header"
    if sequence_repeats:
        return "ordered repeats"
    if content_encoding.strip():
        return "encoded body"  # the canonical request reads the inflated body: key what it reads
    if body_bytes > max_body_bytes:
        return "large body"
    return None


def remember(mode: Mode, outcome: Outcome, provider: str, model: str | None,
             fingerprint_inputs: FingerprintInputs) -> FastHit | None:
    """What to remember of a canonical decision, or None when the fast path must not replay it.

    Only what the certain tiers found: a hit, or one refused as older than `max_age` (the lookup
    stands; the fast path settles it again, `cascade.settle`). `decide` never names an entry for a
    bypassed request, a store problem or record mode."""
    decision = outcome.decision
    if (mode not in FAST_MODES or decision.action not in ("serve", "refuse")
            or decision.tier not in FAST_TIERS or decision.entry_id is None or outcome.request_fp is None
            or outcome.occurrence != 1 or outcome.exhausted is not None):
        return None
    assert decision.tier is not None  # a certain tier, checked above
    match = Match(decision.tier, decision.entry_id, decision.score if decision.score is not None else 1.0)
    return FastHit(match, outcome.request_fp, outcome.normalised_fp,  # a model name is held once, not per entry
                   fingerprint_inputs, provider,
                   sys.intern(model) if model is not None else None)


def recorded(mode: Mode, outcome: Outcome, entry_id: int, provider: str, model: str | None,
             fingerprint_inputs: FingerprintInputs) -> FastHit | None:
    """What to remember of a request whose answer was just recorded: its repeats are exact hits on it."""
    as_hit = replace(outcome, decision=decide(mode, Match(Tier.EXACT, entry_id)), normalised_fp=None)
    return remember(mode, as_hit, provider, model, fingerprint_inputs)


def still_stands(hit: FastHit, current: Match | None, fingerprint_inputs: FingerprintInputs) -> bool:
    """Whether the canonical tiers would answer as they did: the same lookup finds the same match,
    and the fingerprints were computed with the project's current inputs."""
    return current == hit.match and fingerprint_inputs == hit.fingerprint_inputs


def fast_outcome(mode: Mode, hit: FastHit) -> Outcome:
    """The outcome the cascade gave this request (`decide` on the same match)."""
    return Outcome(decide(mode, hit.match), hit.request_fp, hit.normalised_fp)
