"""Which files of the PATHs given are read, and by which reader.

Every file is named by its path as the user gave it (a suite holds hundreds of `sync.yaml`), read
only up to the recording file cap (SEMULA_RECORDING_MAX_MB: a cassette is held to what a recording
may be), and whatever goes wrong reading one file costs only that file's remaining entries.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from semula.recordings.files import UnsafePath, max_file_bytes, read_capped
from semula.recordings.importers import har, mitmflows, vcr
from semula.recordings.importers.interaction import Interaction, Unreadable, reason_of

READERS = {"vcr": vcr.read, "har": har.read, "mitmproxy": mitmflows.read}
# In a directory, the files each source reads (a file named on the command line is always read).
SUFFIXES = {"vcr": (".yaml", ".yml", ".json"), "har": (".har",), "mitmproxy": (".mitm", ".flow", ".flows", ".dump")}


def files_of(paths: list[Path], source: str) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES[source]
                              and p.is_file() and not p.is_symlink())
        else:
            yield path


def interactions(paths: list[Path], source: str, max_input_bytes: int | None = None
                 ) -> Iterator[Interaction | Unreadable]:
    """Every exchange of every file, in order; a file that cannot be read is one Unreadable."""
    read = READERS[source]
    cap = max_input_bytes or max_file_bytes()
    for path in files_of(paths, source):
        try:
            data = read_capped(path, cap)
        except (UnsafePath, OSError) as e:
            yield Unreadable(str(path), f"cannot read {path}: {e}")
            continue
        try:
            yield from read(path, data)
        except RecursionError:
            yield Unreadable(str(path), "nested too deeply to read")
        except Exception as e:  # a reader's bug or a library's surprise: this file's, not the command's
            yield Unreadable(str(path), reason_of(e, "unreadable file"))
