"""Repeated identical requests in order (`semula_repeats=sequence`): the keys of successive answers.

The n-th occurrence of a request in a run is recorded and looked up under its fingerprint with
`#n` appended (n ≥ 2); the first occurrence keeps the bare fingerprint, so a recording made with
one answer per request is the first answer of a sequence, and the store's unique key
(project, request_fp) holds every answer. Pure: the proxy counts the occurrences and passes the
counter in (`Repeats`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SEPARATOR = "#"


def sequenced(fingerprint: str, occurrence: int) -> str:
    """The key of the `occurrence`-th answer (1-based); the first is the bare fingerprint."""
    return fingerprint if occurrence <= 1 else f"{fingerprint}{SEPARATOR}{occurrence}"


def occurrence_of(fingerprint: str) -> int:
    """Which answer of a sequence a stored fingerprint keys (1 for a bare one)."""
    _, sep, n = fingerprint.rpartition(SEPARATOR)
    return int(n) if sep and n.isdigit() and int(n) > 1 else 1


def base_of(fingerprint: str) -> str:
    return fingerprint.rpartition(SEPARATOR)[0] if occurrence_of(fingerprint) > 1 else fingerprint


@dataclass(frozen=True)
class Repeats:
    """Sequence mode for one decision: `count(request_fp)` returns this request's occurrence in its run."""

    count: Callable[[str], int]
    refuse_exhausted: bool = False  # replay: refuse an occurrence past the last answer instead of serving it


def exhausted_reason(occurrence: int, answers: int) -> str:
    return (f"this is occurrence {occurrence} of this request in the run and only {answers} "
            f"answer(s) are recorded (semula_repeats_exhausted=refuse)")
