"""What names a Postgres store, and its URL as messages show it: without importing psycopg.

`store/selection.py` asks these on every start; the driver (~0.3 s of imports) is loaded only when a
server store is actually opened (`store/postgres/connect.py`).
"""

from __future__ import annotations

import re

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_store(spec: str | None) -> bool:
    """Whether a `--store` / `SEMULA_STORE` value names a Postgres server (else: the DuckDB file)."""
    return spec is not None and spec.strip().lower().startswith(SERVER_SCHEMES)


def masked(url: str) -> str:
    """The URL with its password replaced by `***` (URL and key=value forms)."""
    url = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", url, flags=re.IGNORECASE)
