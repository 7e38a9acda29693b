"""Which recordings `semula drift` re-sends: the scope the user asked for, then the cost caps.

The caps are counted before anything is sent (what the recordings say they cost) and again while
sending (what the provider says it cost): drift never makes more calls than `--max-calls`, and stops
once the tokens used reach `--max-tokens`.
"""

from __future__ import annotations

import fnmatch
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from semula.recordings.files import KIND_DIRS, max_file_bytes, read_capped, scan
from semula.recordings.format import Recording, RecordingFileError, loads

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class Selected:
    rel: str  # the file, relative to the folder: where --update writes
    recording: Recording

    @property
    def tokens(self) -> int:
        return (self.recording.prompt_tokens or 0) + (self.recording.completion_tokens or 0)


def parse_age(text: str) -> timedelta:
    """`90d`, `12h`, `2w`, `30m`, `45s`."""
    match = _AGE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not an age such as 30d, 12h or 2w")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def recordings_in(root: Path) -> tuple[list[Selected], list[tuple[str, str]]]:
    """Every loadable recording of the folder, and the files that are not (with why)."""
    good, bad = [], []
    cap = max_file_bytes()
    for found in scan(root):
        if found.rel.split("/", 1)[0] in KIND_DIRS:  # a Realtime conversation: drift re-sends HTTP calls only
            continue
        if found.problem is not None:
            bad.append((found.rel, found.problem))
            continue
        try:
            good.append(Selected(found.rel, loads(read_capped(found.path, cap).decode("utf-8"))))
        except (RecordingFileError, OSError, UnicodeDecodeError) as e:
            bad.append((found.rel, str(e)))
    return sorted(good, key=lambda s: s.rel), bad


def recorded_at(recording: Recording) -> datetime | None:
    try:
        moment = datetime.fromisoformat(recording.recorded_at or "")
    except ValueError:
        return None
    return moment.replace(tzinfo=None)


def in_scope(items: list[Selected], *, project: str | None, path_glob: str | None, older_than: timedelta | None,
             now: datetime, sample: int | None, seed: int) -> list[Selected]:
    out = [s for s in items if (project is None or s.recording.project == project)
           and (path_glob is None or fnmatch.fnmatchcase(s.rel, path_glob))]
    if older_than is not None:  # a recording without a time is old: it cannot prove otherwise
        out = [s for s in out if (at := recorded_at(s.recording)) is None or now - at >= older_than]
    if sample is not None and sample < len(out):
        out = sorted(random.Random(seed).sample(out, sample), key=lambda s: s.rel)
    return out


def capped(items: list[Selected], max_calls: int, max_tokens: int | None) -> tuple[list[Selected], list[Selected]]:
    """(what is sent, what the caps leave out), by the recordings' own token counts."""
    sent: list[Selected] = []
    tokens = 0
    for n, item in enumerate(items):
        if len(sent) >= max_calls or (max_tokens is not None and tokens + item.tokens > max_tokens):
            return sent, items[n:]
        sent.append(item)
        tokens += item.tokens
    return sent, []
