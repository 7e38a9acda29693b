#!/usr/bin/env python3
"""Run one benchmark of scripts/bench/ by name; with no name (or --help), list them.

    .venv/bin/python scripts/bench.py                    # the benchmarks, each with its docstring's first line
    .venv/bin/python scripts/bench.py replay --quick     # imports bench.replay and runs main(["--quick"])
    .venv/bin/python scripts/bench.py replay --help      # that benchmark's own options

A benchmark is a module of scripts/bench/ with a top-level `main(argv=None) -> int`; the other modules
there are what they share (common.py, pyspy.py, ...).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "bench"


def benchmarks() -> dict[str, str]:
    """Name -> its docstring's first line, for every module of scripts/bench/ with a top-level `main`.

    Read from the source, not imported: importing a benchmark loads semula and may set up its run."""
    found = {}
    for path in sorted(BENCH.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            found[path.stem] = (ast.get_docstring(tree) or "").split("\n", 1)[0]
    return found


def usage() -> str:
    known = benchmarks()
    width = max(map(len, known))
    return "\n".join(["usage: scripts/bench.py NAME [args...]   (scripts/bench.py NAME --help: its options)", "",
                      "benchmarks:", *(f"  {name:<{width}}  {line}" for name, line in known.items())])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in benchmarks():
        print(f"scripts/bench.py: unknown benchmark {name!r} (scripts/bench.py --help lists them)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(BENCH.parent))  # the package `bench` (scripts/bench/), whatever the working directory
    sys.argv = [f"scripts/bench.py {name}", *rest]  # argparse's usage line: "bench.py NAME ..."
    return importlib.import_module(f"bench.{name}").main(rest)


if __name__ == "__main__":
    sys.exit(main())
