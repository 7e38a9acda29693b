"""The learnt thresholds of calibrated mode, from the review queue's resolved candidates.

The model is pure (`core.calibration`); this module feeds it a project's approvals and rejections,
read through the store port (`RecordingStore.candidates`), and keeps the result per project so
that a miss does not re-read every verdict. An approval or rejection through this engine drops the
project's entry at once; one made by another process is seen within `REFRESH_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from semula.core.calibration import Calibration, CurvePoint, LabelledVerdict, counts_for_calibration, curve, learn
from semula.core.request.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings
from semula.store.base import RecordingStore

Thresholds = dict[str, dict[str, float]]  # {tier: {stratum: threshold}}
REFRESH_SECONDS = 30.0
MAX_VERDICTS = 1_000_000  # per status: far beyond what a team reviews
_BATCH = 500  # recordings read at a time


def verdict_stratum(recorded_text: str, request_text: str) -> str:
    """The stratum a verdict counts in: the languages of its pair (the recording's last user text and
    the request's). The one definition for the learnt thresholds and the review log's `stratum`."""
    from semula.core.guard.language import languages_of_pair  # with the lexicons: not at a proxy's start-up

    return languages_of_pair(recorded_text, request_text).stratum


def project_verdicts(store: RecordingStore, project: str) -> list[LabelledVerdict]:
    """The project's resolved candidates the model learns from (see `counts_for_calibration`), each in
    the stratum of its pair's languages (the recording's last user text and the request's)."""
    rows = [(row, approved) for status, approved in (("approved", True), ("rejected", False))
            for row in store.candidates(project, status, limit=MAX_VERDICTS)
            if counts_for_calibration(row.reason, row.guard_reason)]
    ids = sorted({row.entry_id for row, _ in rows})
    stored: dict[int, str] = {}
    for start in range(0, len(ids), _BATCH):
        for entry_id, canonical in store.canonicals_by_ids(ids[start:start + _BATCH]).items():
            stored[entry_id] = CanonicalRequest.from_json(canonical).last_user_text()
    return [LabelledVerdict(str(row.tier), float(row.score), approved,
                            verdict_stratum(stored[row.entry_id], row.request_text))
            for row, approved in rows if row.entry_id in stored]


def calibrate_project(store: RecordingStore, project: str, settings: ProjectSettings) -> Calibration:
    return learn(project_verdicts(store, project), settings.max_false_hit_rate)


def project_curve(store: RecordingStore, project: str) -> dict[tuple[str, str], list[CurvePoint]]:
    return curve(project_verdicts(store, project))


class LearntThresholds:
    """{tier: {stratum: threshold}} per project for the near-match search; any thread (reads use its store)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, float], tuple[float, Thresholds]] = {}

    def __call__(self, store: RecordingStore, project: str, settings: ProjectSettings) -> Thresholds:
        if settings.near_serve != "calibrated":
            return {}
        key = (project, settings.max_false_hit_rate)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < REFRESH_SECONDS:
            return cached[1]
        thresholds = calibrate_project(store, project, settings).thresholds()
        with self._lock:
            self._cache[key] = (now, thresholds)
        return thresholds

    def invalidate(self, project: str) -> None:
        """A verdict was given in `project`: learn again on its next miss."""
        with self._lock:
            for key in [k for k in self._cache if k[0] == project]:
                del self._cache[key]
