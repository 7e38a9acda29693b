"""The package's shape: no import cycles between its modules, no module over MAX_LINES lines, no class over
MAX_CLASS lines.

Counted as the shared structure check counts: every ``import`` anywhere in a file (in functions, under
``if TYPE_CHECKING:``), relative imports resolved, ``from semula.x import y`` an import of ``semula.x`` and, when
``semula.x.y`` is a module, of that too; a module's lines are its newline characters, a class's lines run from its
``class`` line to its last. A package's ``__init__`` re-exporting its own submodules is not a cycle with them.
"""

from __future__ import annotations

import ast
from collections import deque
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "addon" / "semula"
MAX_LINES, MAX_CLASS = 500, 350

@cache
def _parsed(path: Path, text: str) -> ast.Module:
    return ast.parse(text, str(path))


def parse(path: Path, text: str | None = None) -> ast.Module:
    """The file's syntax tree, parsed once a run for each text (the checks below each walk the package)."""
    return _parsed(path, path.read_text() if text is None else text)


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under the package folder ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, tree: ast.Module) -> set[str]:
    """Every dotted name this module's import statements may load (some are not modules of the package)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    return {name: set(targets) for name, targets in _import_graph(root).items()}  # a copy: the callers' own


@cache
def _import_graph(root: Path) -> dict[str, set[str]]:  # once a run for each folder: each check walks it
    mods = modules(root)
    graph = {}
    for name, path in mods.items():
        tree = parse(path)
        graph[name] = {m for m in imported(name, path, tree) if m in mods and m != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycle_through(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest import path from start back to start, staying within ``within``."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for nxt in sorted(graph[here] & within):
            if nxt == start:
                path = [here]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if nxt not in parent:
                parent[nxt] = here
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")


def import_cycles(root: Path) -> list[str]:
    """One line per group of modules that import each other, with one cycle's path."""
    graph = import_graph(root)
    reach = {name: reachable(graph, name) for name in graph}
    found, done = [], set()
    for name in sorted(graph):
        if name in done or name not in reach[name]:
            continue
        group = {other for other in reach[name] if name in reach[other]}
        done |= group
        # A package and its own submodules importing each other (re-exports) is not a cycle.
        inner = sorted(m for m in group if not any(o.startswith(m + ".") for o in group))
        if len(inner) > 1:
            found.append("import cycle: " + " -> ".join(cycle_through(graph, inner[0], group)))
    return found


def size_breaches(root: Path) -> tuple[list[str], list[str]]:
    """(modules over MAX_LINES, classes over MAX_CLASS), one line each."""
    long_modules, long_classes = [], []
    for path in modules(root).values():
        text = path.read_text()
        shown = path.relative_to(root.parent).as_posix()
        if text.count("\n") > MAX_LINES:
            long_modules.append(f"module {shown} has {text.count(chr(10))} lines (> {MAX_LINES})")
        for node in ast.walk(parse(path, text)):
            if isinstance(node, ast.ClassDef) and (length := node.end_lineno - node.lineno + 1) > MAX_CLASS:
                long_classes.append(f"class {node.name} in {shown} has {length} lines (> {MAX_CLASS})")
    return long_modules, long_classes


BACKENDS = ("duckdb", "postgres")  # the store's backend folders


def backend_imports(root: Path, store: str = "store") -> list[str]:
    """Modules outside the store package that import one of its backends (`store/duckdb/`, `store/postgres/`):
    a backend is chosen only by the store's own factory (`store.selection.open_store`)."""
    package = root.name
    backend = tuple(f"{package}.{store}.{b}" for b in BACKENDS)
    found = []
    for name, targets in sorted(import_graph(root).items()):
        if name == f"{package}.{store}" or name.startswith(f"{package}.{store}."):
            continue
        found += [f"{name} imports the backend module {t}" for t in sorted(targets)
                  if any(t == b or t.startswith(b + ".") for b in backend)]
    return found


def packages_without_docstring(root: Path) -> list[str]:
    """Packages whose `__init__.py` does not say, in a docstring, what the folder is for."""
    return sorted(f"{path.relative_to(root.parent).as_posix()} has no docstring"
                  for path in root.rglob("__init__.py") if not ast.get_docstring(parse(path)))


# ---------------------------------------------------------------- the package


def test_only_the_store_picks_a_backend() -> None:
    found = backend_imports(PACKAGE)
    assert not found, "\n".join(found)


def test_nothing_below_the_cli_imports_it() -> None:
    """The commands sit on top: the session, the proxy and the plugin never import `cli` (it imports them)."""
    graph = import_graph(PACKAGE)
    found = [f"{name} imports {t}" for name, targets in sorted(graph.items())
             if name.startswith(("semula.session", "semula.proxy", "semula.pytest_plugin", "semula.engine",
                                  "semula.admin"))
             for t in sorted(targets) if t == "semula.cli" or t.startswith("semula.cli.")]
    assert not found, "\n".join(found)


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports_upward(graph: dict[str, set[str]], below: str, above: tuple[str, ...]) -> list[str]:
    """The imports from the modules in package `below` of a module in one of the packages `above`."""
    return [f"{name} imports {t}" for name, targets in sorted(graph.items()) if inside(name, below)
            for t in sorted(targets) if any(inside(t, package) for package in above)]


def test_the_admin_endpoint_sits_below_its_users() -> None:
    """`admin` (protocol, server, client) is used by the proxy, the CLI, the session and the plugin: it imports none."""
    found = imports_upward(import_graph(PACKAGE), "semula.admin",
                           ("semula.proxy", "semula.session", "semula.cli", "semula.pytest_plugin", "semula.engine"))
    assert not found, "\n".join(found)


def test_the_proxy_folders_point_down() -> None:
    """Inside `proxy/`: the hooks on top, then `realtime/`, then `call/`, then `run/`; no folder imports one above it."""
    graph = import_graph(PACKAGE)
    top = tuple(f"semula.proxy.{m}" for m in ("addon", "commands"))
    found = (imports_upward(graph, "semula.proxy.realtime", top)
             + imports_upward(graph, "semula.proxy.call", (*top, "semula.proxy.realtime"))
             + imports_upward(graph, "semula.proxy.run", (*top, "semula.proxy.realtime", "semula.proxy.call")))
    assert not found, "\n".join(found)


def test_every_package_says_what_it_is_for() -> None:
    found = packages_without_docstring(PACKAGE)
    assert not found, "\n".join(found)


def test_no_import_cycles() -> None:
    cycles = import_cycles(PACKAGE)
    assert not cycles, "\n".join(cycles)


def test_no_module_over_max_lines() -> None:
    long_modules, _ = size_breaches(PACKAGE)
    assert not long_modules, "\n".join(long_modules)


def test_no_class_over_max_lines() -> None:
    _, long_classes = size_breaches(PACKAGE)
    assert not long_classes, "\n".join(long_classes)


# ---------------------------------------------------------------- the checker itself


def write(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under root with these files (and its ``__init__.py``)."""
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "a/__init__.py": "from . import x\n",
        "a/x.py": "def f():\n    from ..b import y\n",
        "a/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b.y import Thing\n",
        "b/__init__.py": "",
        "b/y.py": "import pkg.c\nfrom pkg.b import w\nfrom .w import name\n",
        "b/w.py": "import os\n",
        "c.py": "from pkg.a import x\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.a.x"}
    assert graph["pkg.a.x"] == {"pkg.b", "pkg.b.y"}
    assert graph["pkg.a.z"] == {"pkg.b.y"}
    assert graph["pkg.b.y"] == {"pkg.c", "pkg.b", "pkg.b.w"}
    assert graph["pkg.c"] == {"pkg.a", "pkg.a.x"}
    assert graph["pkg.b.w"] == set()


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # a cycle through a late import, reported with its path
        ({"a.py": "from pkg import b\n", "b.py": "def late():\n    from pkg.c import thing\n",
          "c.py": "from .a import other\n", "d.py": "import pkg.a\n"},
         ["import cycle: pkg.a -> pkg.b -> pkg.c -> pkg.a"]),
        # a package re-exporting its own submodules, which import it back, is no cycle
        ({"p/__init__.py": "from pkg.p.one import f\nfrom pkg.p.two import g\n", "p/one.py": "from pkg.p import two\n",
          "p/two.py": "x = 1\n", "q.py": "from pkg.p import f\n"},
         []),
    ],
)
def test_import_cycles(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert import_cycles(write(tmp_path, files)) == expected


def test_sizes_are_counted_like_the_shared_check(tmp_path: Path) -> None:
    body = "    x = 1\n" * (MAX_CLASS - 1)
    pkg = write(tmp_path, {
        "fits.py": "class Fits:\n" + body + "\n" * (MAX_LINES - MAX_CLASS),
        "big.py": "class Big:\n" + body + "    y = 2\n" + "\n" * (MAX_LINES - MAX_CLASS),
    })
    assert size_breaches(pkg) == (
        [f"module pkg/big.py has {MAX_LINES + 1} lines (> {MAX_LINES})"],
        [f"class Big in pkg/big.py has {MAX_CLASS + 1} lines (> {MAX_CLASS})"],
    )


def test_backend_imports_and_docstrings_are_found(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "store/__init__.py": '"""The store."""\n',
        "store/duckdb/__init__.py": '"""DuckDB."""\n',
        "store/duckdb/store.py": "x = 1\n",
        "store/postgres/__init__.py": '"""Postgres."""\n',
        "store/postgres/store.py": "x = 1\n",
        "store/duckdb_notes.py": "x = 1\n",  # a shared module whose name only starts like a backend
        "store/selection.py": "from pkg.store.duckdb import store\nfrom pkg.store.postgres import store as pg\n",
        "proxy/__init__.py": "",
        "proxy/edge.py": "def late():\n    from pkg.store.duckdb.store import x\n    from pkg.store import duckdb_notes\n",
        "proxy/other.py": '"""x"""\nfrom pkg.store import postgres\n',
    })
    assert backend_imports(pkg) == ["pkg.proxy.edge imports the backend module pkg.store.duckdb.store",
                                    "pkg.proxy.other imports the backend module pkg.store.postgres"]
    assert packages_without_docstring(pkg) == ["pkg/__init__.py has no docstring", "pkg/proxy/__init__.py has no docstring"]
