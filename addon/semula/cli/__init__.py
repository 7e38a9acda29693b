"""The `semula` command line: one small module per topic, gathered in one click group.

The group imports a command's module only when that command runs (or help lists it): `semula proxy`
and `semula exec` start a proxy on every run, and the other commands' imports (the store, rich,
Postgres' driver, the engine) would be paid before it is ready.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from typing import Any

import click

# name -> "module:attribute", in the order help lists them
COMMANDS = {
    "proxy": "proxy_cmd:proxy", "env": "proxy_cmd:env", "exec": "exec_cmd:exec_command",
    "entries": "store_cmds:entries", "config": "store_cmds:config", "stats": "store_cmds:stats",
    "review": "review_cmd:review", "eval": "eval_cmd:eval_command", "embeddings": "embeddings_cmd:embeddings",
    "recordings": "recordings_cmd:recordings", "export": "recordings_cmd:export_command",
    "import": "import_cmd:import_command", "drift": "drift_cmd:drift", "calibrate": "calibrate_cmd:calibrate",
    "report": "report_cmd:report",
}
# The report needs the `analysis` extra; without it the other commands still work.
OPTIONAL = {"report"}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if name not in OPTIONAL or self.get_command(ctx, name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name].split(":")
        try:
            return getattr(importlib.import_module(f"semula.cli.{module}"), attribute)
        except ImportError:
            if cmd_name in OPTIONAL:
                return None
            raise


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="semula")
def main() -> None:
    """semula — record and replay LLM API calls through mitmproxy."""


def run() -> None:
    """The `semula` program: the console script and `python -m semula` (tests call `main` in process)."""
    if sys.argv[1:2] != ["report"]:  # the report's notebooks run in kernels of their own; nothing else reads pandas
        without_pandas()
    main()


def without_pandas() -> None:
    """semula never uses pandas, but DuckDB's client imports it when it first binds a query's parameters
    (to recognise pandas values): ~0.35 s of CPU in every process that opens a store, a proxy's start
    among them. A finder first in sys.meta_path refuses that import at once, and DuckDB and pyarrow carry
    on as they do without pandas installed (a None in sys.modules would not do: pyarrow reads the entry);
    each later DuckDB query pays ~35 µs for the refused import (duckdb 1.5.5). Only in semula's own
    processes: the pytest plugin runs inside the user's tests, which may use pandas."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError("semula's own processes do not load pandas", name=fullname)
        return None
