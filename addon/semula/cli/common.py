"""Options and helpers shared by the CLI's command modules."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from semula.admin.client import call

from semula.admin.protocol import AdminError, NoProxy, dumps, read_admin_info
from semula.session.run import default_data_dir
from semula.store.selection import masked, open_store, server_url, store_spec
from semula.store.types import StoreError



PIPE_WIDTH = 10_000  # a CI log or a pipe: no terminal to fit, so a value is never cut or wrapped


def _console() -> Any:
    """One rich console, made when a command first prints with it: `semula proxy` never loads rich.

    Not a terminal (a CI log, `| grep`): rich would assume 80 columns and cut or wrap every long
    value (a recording's path, a review's reason); there each row stays on one line, whole."""
    if "console" not in globals():
        from rich.console import Console

        made = Console()
        if not made.is_terminal and "COLUMNS" not in os.environ:
            made = Console(width=PIPE_WIDTH)
        globals()["console"] = made
    return globals()["console"]


def __getattr__(name: str) -> Any:  # `from semula.cli.common import console`
    if name == "console":
        return _console()
    raise AttributeError(name)


_data_dir_only = click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=default_data_dir,
    show_default="./.semula or $SEMULA_DATA_DIR", help="semula's data dir (store, logs, admin.json)",
)


def _remember_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """`--store URL` becomes $SEMULA_STORE, so a proxy this command starts (exec) uses it too, and the
    URL (maybe with a password) never appears in a child's command line."""
    if value is None:
        return
    if value.strip() and not server_url(value):
        raise click.BadParameter(f"{masked(value)!r} is not a postgresql:// URL (leave it out for the DuckDB file)")
    os.environ["SEMULA_STORE"] = value


_store_option = click.option(
    "--store", metavar="URL", default=None, expose_value=False, callback=_remember_store,
    help="a shared Postgres store, postgresql://user@host/db [default: $SEMULA_STORE, else the DuckDB file "
         "in the data dir]; put the password in PGPASSWORD or ~/.pgpass",
)


def data_dir_option(func: Any) -> Any:
    """`--data-dir` and `--store`: every command that opens a store takes both."""
    return _store_option(_data_dir_only(func))
json_option = click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")


def run_store_operation(data_dir: Path, method: str, params: dict[str, Any]) -> Any:
    """Through the running proxy's admin endpoint, or — when no proxy holds the store — directly."""
    if store_spec(data_dir).file is not None:  # a shared store is opened directly, from any machine
        try:
            return call(data_dir, method, params)
        except NoProxy:
            pass
        except AdminError as e:
            raise click.ClickException(str(e)) from None
    from semula.engine.operations import run_operation

    with open_engine(data_dir, _existing_folder(data_dir)) as engine:
        try:
            return json.loads(dumps(run_operation(engine, method, params)))
        except (StoreError, ValueError, KeyError) as e:
            raise click.ClickException(str(e)) from None


@contextmanager
def store_operations(data_dir: Path) -> Iterator[Callable[[str, dict[str, Any]], Any]]:
    """Several operations, as `run_store_operation` runs one: through the running proxy's admin endpoint,
    or on the store opened once for all of them and closed afterwards (`semula review web`'s page)."""
    if store_spec(data_dir).file is not None and (info := read_admin_info(data_dir)) is not None:
        def through_proxy(method: str, params: dict[str, Any]) -> Any:
            try:
                return call(data_dir, method, params, info=info)
            except (AdminError, NoProxy) as e:
                raise click.ClickException(str(e)) from None

        yield through_proxy
        return
    from semula.engine.operations import run_operation

    with open_engine(data_dir, _existing_folder(data_dir)) as engine:
        def directly(method: str, params: dict[str, Any]) -> Any:
            try:
                return json.loads(dumps(run_operation(engine, method, params)))
            except (StoreError, ValueError, KeyError) as e:
                raise click.ClickException(str(e)) from None

        yield directly


def _existing_folder(data_dir: Path) -> Any:
    """The recordings folder a proxy started here would use, if it exists (so a delete removes the file)."""
    from semula.recordings.location import recordings_location

    if store_spec(data_dir).file is None and not os.environ.get("SEMULA_RECORDINGS"):
        return None  # with a server store the folder is off unless asked for
    location = recordings_location(os.environ.get("SEMULA_RECORDINGS"))
    if location is None or not location.is_dir():
        return None
    from semula.recordings.folder import RecordingsFolder

    return RecordingsFolder(location, data_dir)


@contextmanager
def open_engine(data_dir: Path, folder: Any = None) -> Iterator[Any]:
    """The store opened directly (no proxy holds it), with a review log, closed afterwards."""
    from semula.engine.engine import Engine
    from semula.calllog.schema import REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION
    from semula.calllog.writer import ParquetLog

    try:
        store = open_store(store_spec(data_dir), follow=False)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    reviews = ParquetLog(data_dir / "reviews", REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION)
    engine = None
    try:
        try:
            engine = Engine.open(store, review_log=reviews.append, folder=folder)
        except StoreError as e:
            raise click.ClickException(str(e)) from None
        try:
            yield engine
        except StoreError as e:  # the server lost mid-command: one line and exit 1, not a traceback
            raise click.ClickException(str(e)) from None
    finally:
        reviews.close()
        if engine is not None:
            engine.close()
        else:
            store.close()


def print_json(value: Any) -> None:
    click.echo(dumps(value).decode())


SHORT_CELL = 10


def print_table(title: str, rows: list[dict[str, Any]], columns: list[str],
                formatters: dict[str, Callable[[Any], str]] | None = None) -> None:
    from rich.table import Table

    table = Table(title=title)
    cells = [[(formatters or {}).get(c, _plain)(row.get(c)) for c in columns] for row in rows]
    for n, column in enumerate(columns):
        # Short values (an id, a status, a score) stay whole on a narrow terminal; long texts wrap.
        longest = max([len(column)] + [len(r[n]) for r in cells])
        table.add_column(column, min_width=longest if longest <= SHORT_CELL else None,
                         no_wrap=_console().width >= PIPE_WIDTH)  # a pipe: one row a line; a set width: wrap
    for row in cells:
        table.add_row(*row)
    _console().print(table)


def _plain(value: Any) -> str:
    return "" if value is None else str(value)
