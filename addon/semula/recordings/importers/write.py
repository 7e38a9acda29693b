"""Putting imported recordings in the folder: its secrets key, the files that exist, atomic writes.

The same rules as the proxy's writes (`RecordingsFolder.write`): paths built only from validated
names, checked against links before and after the directories are made, written atomically. A file
already there is kept: re-importing a cassette changes nothing, and a recording made by the proxy
is never overwritten by an import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from semula.core.redact import FingerprintKey
from semula.recordings.files import (UnsafePath, contained, ensure_ignores, make_directories, read_capped,
                                     write_atomically)
from semula.recordings.folder import FOLDER_FORMAT, META_FILE
from semula.recordings.importers.convert import Planned, Skipped


def folder_key(root: Path, create: bool) -> FingerprintKey:
    """The folder's secrets key (`_semula.json`), so imported secrets tag as the proxy tags them there.
    No folder yet: a fresh salt, written when `create` (not on a dry run)."""
    meta = root / META_FILE
    try:
        return FingerprintKey(bytes.fromhex(json.loads(read_capped(meta, 1 << 16).decode("utf-8"))["fingerprint_salt"]))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UnsafePath(f"{meta} is unreadable ({e}): fix or delete it first") from None
    key = FingerprintKey.generate()
    if create:
        ensure_ignores(root)  # before the first temporary file: a kill -9 mid-write leaves none to commit
        write_atomically(contained(root, META_FILE),
                         json.dumps({"format": FOLDER_FORMAT, "fingerprint_salt": key.salt.hex()}, indent=2) + "\n")
    return key


def kept_existing(root: Path, results: Iterable[Planned | Skipped]) -> list[Planned | Skipped]:
    """A file already at a recording's path is kept: that recording is skipped, with the path."""
    out: list[Planned | Skipped] = []
    for result in results:
        if isinstance(result, Planned):
            try:
                present = os.path.lexists(contained(root, result.rel))
            except UnsafePath as e:
                out.append(Skipped(result.source, str(e)))
                continue
            if present:
                result = Skipped(result.source, f"already in the folder: {result.rel} (kept; delete it to re-import)")
        out.append(result)
    return out


def write(root: Path, results: list[Planned | Skipped],
          on_error: Callable[[Planned, OSError], None]) -> int:
    """Write every planned file; returns how many were written (a failed one is passed to `on_error`)."""
    written = 0
    for result in results:
        if not isinstance(result, Planned):
            continue
        try:
            ensure_ignores(root)  # before the first temporary file (and again if deleted meanwhile)
            path = contained(root, result.rel)
            make_directories(path.parent)
            write_atomically(contained(root, result.rel), result.text)  # again: a link planted meanwhile
        except OSError as e:
            on_error(result, e)
            continue
        written += 1
    return written
