"""glibc's malloc gives each thread that contends for the heap an arena of its own (up to 8 per core)
and keeps what is freed in each. A proxy with an event loop, a store thread, reader threads and
DuckDB's threads then grew its RSS with load although what it held stayed within its budgets (the
soak, issue 12: +130 MB in two minutes at flat counted holdings). Two arenas made it flatter, and
trimming the heap every 30 s hands back what it frees. While the load records, RSS grows with the store,
~2 KB a recording beyond what the proxy counts (benchmark/results/reliability.md)."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

M_ARENA_MAX = -8  # <malloc.h>
ARENAS = 2


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (unless MALLOC_ARENA_MAX says otherwise); whether the cap was set.
    Elsewhere than glibc: nothing to do."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_ARENA_MAX, arenas) == 1


# What the heap frees stays resident until the top of the heap is free, which fragmentation under load
# seldom allows: the soak's [heap] grew 49 -> 118 MB in three minutes at flat counted holdings. Trimming
# every 30 s (about 25 ms for a fragmented 500 MB heap, off the event loop) kept it at 80-120 MB.
TRIM_SECONDS = 30.0
_trimming: threading.Thread | None = None


def trim() -> bool:
    """Hand the heap's free pages back to the system (glibc's malloc_trim); whether any were."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    malloc_trim.argtypes, malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    return malloc_trim(0) == 1


def start_trimming(every: float = TRIM_SECONDS) -> threading.Thread | None:
    """Trim the heap every `every` seconds on one daemon thread per process (ctypes drops the GIL while
    malloc_trim runs); the thread, or None off Linux."""
    global _trimming
    if not sys.platform.startswith("linux"):
        return None
    if _trimming is None:
        def loop() -> None:
            while True:
                time.sleep(every)
                trim()

        _trimming = threading.Thread(target=loop, name="semula-trim", daemon=True)
        _trimming.start()
    return _trimming
