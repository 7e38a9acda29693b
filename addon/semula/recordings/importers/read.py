"""Which files of the PATHs given are read, and by which reader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from semula.recordings.files import UnsafePath, read_capped
from semula.recordings.importers import har, mitmflows, vcr
from semula.recordings.importers.interaction import Interaction, Unreadable

READERS = {"vcr": vcr.read, "har": har.read, "mitmproxy": mitmflows.read}
# In a directory, the files each source reads (a file named on the command line is always read).
SUFFIXES = {"vcr": (".yaml", ".yml", ".json"), "har": (".har",), "mitmproxy": (".mitm", ".flow", ".flows", ".dump")}
MAX_INPUT_BYTES = 1 << 30


def files_of(paths: list[Path], source: str) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES[source]
                              and p.is_file() and not p.is_symlink())
        else:
            yield path


def interactions(paths: list[Path], source: str) -> Iterator[Interaction | Unreadable]:
    """Every exchange of every file, in order; a file that cannot be read is one Unreadable."""
    read = READERS[source]
    for path in files_of(paths, source):
        try:
            data = read_capped(path, MAX_INPUT_BYTES)
        except (UnsafePath, OSError) as e:
            yield Unreadable(path.name, f"cannot read {path}: {e}")
            continue
        try:
            yield from read(path, data)
        except RecursionError:
            yield Unreadable(path.name, "nested too deeply to read")
