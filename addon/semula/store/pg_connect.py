"""Connecting to the Postgres store: the small pool, the masked URL every message shows, and the one
place psycopg errors become `StoreError`s.

A pool per process holds one to four connections: thirty runners with a big pool each would
exhaust a server's `max_connections`. No password ever reaches a log line: messages name the
server by `masked(url)`, and any text from the driver is scrubbed of the password too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from semula.store.types import StoreError

# The pool logs every failed connection attempt (several lines each, a few a second while the server
# is down); semula says once why the store is unavailable and when it is back.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

POOL_MIN = 1
POOL_MAX = 4
CONNECT_TIMEOUT_SECONDS = 3
POOL_WAIT_SECONDS = 5.0  # a call waits this long for a connection before failing open
SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_store(spec: str | None) -> bool:
    """Whether a `--store` / `SEMULA_STORE` value names a Postgres server (else: the DuckDB file)."""
    return bool(spec) and spec.strip().lower().startswith(SERVER_SCHEMES)


def masked(url: str) -> str:
    """The URL with its password replaced by `***` (URL and key=value forms)."""
    url = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", url, flags=re.IGNORECASE)


def _password(url: str) -> str | None:
    try:
        return conninfo_to_dict(url).get("password") or None
    except psycopg.Error:
        return None


def scrub(text: str, url: str) -> str:
    """`text` without the URL's password, wherever the driver may have echoed it."""
    password = _password(url)
    text = text.replace(url, masked(url))
    return text.replace(password, "***") if password else text


def describe(e: BaseException, url: str) -> str:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    if isinstance(e, psycopg_pool.PoolTimeout) or isinstance(e, psycopg.OperationalError):
        return scrub(f"the Postgres store {masked(url)} is unreachable: {first}", url)
    return scrub(f"the Postgres store {masked(url)} failed: {first}", url)


@contextmanager
def pg_errors(url: str) -> Iterator[None]:
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
        raise StoreError(describe(e, url)) from e


def connection_kwargs(schema: str | None) -> dict[str, object]:
    kwargs: dict[str, object] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS, "application_name": "semula"}
    if schema:
        kwargs["options"] = f"-c search_path={schema}"
    return kwargs


def open_pool(url: str, schema: str | None, configure: Callable[[psycopg.Connection], None] | None = None
              ) -> psycopg_pool.ConnectionPool:
    """A small pool, opened and checked: a server that cannot be reached fails here, with the reason."""
    pool = psycopg_pool.ConnectionPool(
        url, min_size=POOL_MIN, max_size=POOL_MAX, kwargs=connection_kwargs(schema), open=False,
        timeout=POOL_WAIT_SECONDS, check=psycopg_pool.ConnectionPool.check_connection, configure=configure,
        name="semula",
    )
    try:
        pool.open(wait=True, timeout=POOL_WAIT_SECONDS + CONNECT_TIMEOUT_SECONDS)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
        pool.close(timeout=1)
        raise StoreError(describe(e, url)) from e
    return pool


def direct_connection(url: str, schema: str | None) -> psycopg.Connection:
    """A connection outside the pool (LISTEN needs one that stays ours); autocommit."""
    return psycopg.connect(url, autocommit=True, **connection_kwargs(schema))  # type: ignore[arg-type]
