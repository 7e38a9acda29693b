"""The `semula` command line: one small module per topic, gathered in one click group.

The group imports a command's module only when that command runs (or help lists it): `semula proxy`
and `semula exec` start a proxy on every run, and the other commands' imports (the store, rich,
Postgres' driver, the engine) would be paid before it is ready.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import sys
from collections.abc import Callable
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
    among them. DuckDB and pyarrow carry on as they do without pandas installed when the import fails (a
    None in sys.modules would not do: pyarrow reads the entry). Only in semula's own processes: the pytest
    plugin runs inside the user's tests, which may use pandas.

    DuckDB asks again at every query (duckdb 1.5.5: 2 to 8 times a query), by `builtins.__import__`:
    refused there, an ask costs a function call. A finder in sys.meta_path (which also refuses the imports
    that do not go through `__import__`) is reached only through the import system's module locks, which
    the threads querying at once contend for: 64 misses at once spent ~7 % of their store thread's time
    there, and DuckDB's queries on 4 threads took 15 % longer than with the refusal in `__import__`."""
    if "pandas" in sys.modules:
        return
    if not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    if not getattr(builtins.__import__, "refuses_pandas", False):
        builtins.__import__ = _refusing_pandas(builtins.__import__)


def _refusing_pandas(real: Callable[..., Any]) -> Callable[..., Any]:
    def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and (name == "pandas" or name.startswith("pandas.")):
            raise ModuleNotFoundError(NO_PANDAS, name=name)
        return real(name, globals, locals, fromlist, level)

    __import__.refuses_pandas = True  # type: ignore[attr-defined]
    return __import__


NO_PANDAS = "semula's own processes do not load pandas"


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(NO_PANDAS, name=fullname)
        return None
