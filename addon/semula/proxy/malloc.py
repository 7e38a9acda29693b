"""glibc's malloc gives each thread that contends for the heap an arena of its own (up to 8 per core)
and keeps what is freed in each. A proxy with an event loop, a store thread, reader threads and
DuckDB's threads then grew its RSS with load although what it held stayed within its budgets (the
soak, issue 12: +130 MB in two minutes at flat counted holdings; flat with two arenas)."""

from __future__ import annotations

import ctypes
import os
import sys

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
