"""A misspelt semula option is an error before anything starts, never a silent default.

mitmproxy defers an option it does not know (an addon may declare it later) and then ignores it, so
`--set semula_mdoe=replay` would run in auto mode: in CI, misses forwarded and recorded where replay
was meant. semula knows its own names — `proxy/run/options.py` declares them, the one list — and checks
every place a run takes them: `--set` (`semula proxy`, `semula exec`), the plugin's `--semula-set`,
and the environment, whose `SEMULA_*` variables are all listed here (`ENVIRONMENT`). Values are
checked as the proxy will read them (mitmproxy's parser, then `options.read`), so a bad value says
so in one line instead of a proxy that does not start.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

__all__ = ["ENVIRONMENT", "OPTION_VARIABLES", "OptionError", "check_environment", "check_run_options", "check_sets"]

# The variables that give a semula_* option its default (`proxy/run/options.py`, `store/selection.py`).
OPTION_VARIABLES: dict[str, str] = {
    "SEMULA_DATA_DIR": "semula_data_dir",
    "SEMULA_RECORDINGS": "semula_recordings",
    "SEMULA_STORE": "semula_store",
    "SEMULA_EMBEDDINGS": "semula_embeddings",
}
# Every other SEMULA_* variable semula, its scripts or this repository's tests read: never flagged.
ENVIRONMENT: frozenset[str] = frozenset({
    *OPTION_VARIABLES,
    "SEMULA_TEST_WORKERS",  # scripts/test: how many pytest-xdist workers
    "SEMULA_MODE",  # the mode of `semula proxy`/`semula exec` without --mode; `semula drift` refuses replay
    "SEMULA_STORE_LISTEN", "SEMULA_DUCKDB_MEMORY", "SEMULA_RECORDING_MAX_MB", "SEMULA_SIDECAR_KB", "SEMULA_DEBUG",
    "SEMULA_EMBEDDINGS_MODEL", "SEMULA_EMBEDDINGS_MODEL_PATH", "SEMULA_EMBEDDINGS_OFFLINE",
    "SEMULA_MCP_TOKEN",  # `semula drift`: the bearer token it sends to registered MCP servers only
    "SEMULA_PROJECT",  # read by the example JVM client (tests/clients/Chat.java), not by semula
    "SEMULA_PYTHON", "SEMULA_REQUIRE_POSTGRES",  # scripts/ and .ci/
    # This repository's tests and benchmarks.
    "SEMULA_SHARED_DIR", "SEMULA_PG_BINDIR", "SEMULA_TEST_OUT", "SEMULA_BENCH_ANSWERS",
    "SEMULA_FUZZ_SEED", "SEMULA_FUZZ_BODIES", "SEMULA_FUZZ_PROXY_BODIES",
})
PREFIX = "semula_"
# How alike a name must be to a known one to count as its misspelling (difflib's ratio): a user's own
# SEMULA_SOMETHING that resembles no name of semula's is left alone.
CLOSE = 0.8


class OptionError(ValueError):
    """A semula option or variable that is unknown or has a bad value; the message is the one line to print."""


def option_names() -> tuple[str, ...]:
    from semula.proxy.run.options import declared

    return tuple(option.name for option in declared())


def check_run_options(sets: Sequence[str], environ: Mapping[str, str], where: str = "--set") -> None:
    """Everything a run's proxy will read from semula: its `--set` items (`where`: how the user gave
    them) and the environment."""
    check_environment(environ)
    check_sets(sets, where)


def check_sets(sets: Sequence[str], where: str = "--set") -> None:
    """Unknown semula_* names (or names close to one) and values the proxy would refuse."""
    names = option_names()
    ours: list[str] = []
    for item in sets:
        name = item.split("=", 1)[0].strip()
        if name in names:
            ours.append(item)
        elif name.lower().replace("-", "_").startswith(PREFIX) or _closest(name, names):
            raise OptionError(f"unknown option {name!r} in {where}{_suggestion(name, names)}")
    _check_values(ours, where)


def _closest(name: str, names: Sequence[str], cutoff: float = CLOSE) -> str | None:
    match = difflib.get_close_matches(name.lower().replace("-", "_"), names, n=1, cutoff=cutoff)
    return match[0] if match else None


def _suggestion(name: str, names: Sequence[str]) -> str:
    closest = _closest(name, names, cutoff=0.6)
    if closest:
        return f": did you mean {closest}?"
    return " (semula proxy --help lists semula's options)"


def _check_values(items: Sequence[str], where: str) -> None:
    """The values as the proxy parses and validates them (mitmproxy's parser, `options.read`)."""
    if not items:
        return
    from mitmproxy import exceptions, optmanager

    from semula.proxy.run.options import MITMPROXY_OPTIONS, declare, declared, read

    manager = optmanager.OptManager()
    declare(manager)
    for name in MITMPROXY_OPTIONS:  # `read` copies them; their real values are mitmproxy's business
        manager.add_option(name, str if name != "listen_port" else int, "" if name != "listen_port" else 0, "")
    choices = {option.name: option.choices for option in declared() if option.choices}
    try:
        manager.set(*items)
        for item in items:
            name, _, value = item.partition("=")
            if name in choices and value not in choices[name]:
                raise exceptions.OptionsError(
                    f"{name}={value!r} is not one of {', '.join(choices[name])}")
        read(manager)
    except exceptions.OptionsError as e:
        text = str(e).removeprefix("semula: ")
        raise OptionError(f"bad option value in {where}: {text}") from None


def check_environment(environ: Mapping[str, str]) -> None:
    """A SEMULA_* variable semula does not read, named like one it reads or like an option, is an error.

    "Like": a typo away (an edit or a swap of two letters; two in names over 6 letters after SEMULA_), so
    a variable of the user's own (SEMULA_PORT, SEMULA_STORE_URL) is left alone."""
    as_variables = {name.upper(): name for name in option_names()}
    for variable in sorted(environ):
        if not variable.upper().startswith("SEMULA_") or variable in ENVIRONMENT:
            continue
        if variable in as_variables:
            raise OptionError(f"{variable} is not read from the environment: set the option with "
                              f"--set {as_variables[variable]}=VALUE")
        closest = _typo_of(variable.upper(), sorted({*ENVIRONMENT, *as_variables}))
        if closest is None:
            continue
        if closest in ENVIRONMENT:
            raise OptionError(f"unknown environment variable {variable}: did you mean {closest}?")
        option = as_variables[closest]
        raise OptionError(f"unknown environment variable {variable}: did you mean the option {option} "
                          f"(--set {option}=VALUE)?")


def _typo_of(variable: str, known: Sequence[str]) -> str | None:
    suffix = variable.removeprefix("SEMULA_")
    best: tuple[int, str] | None = None
    for name in known:
        name_suffix = name.removeprefix("SEMULA_")
        distance = _edits(suffix, name_suffix)
        if distance <= (1 if len(name_suffix) <= 6 else 2) and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None


def _edits(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap of neighbours) from a to b: the optimal string alignment distance."""
    rows = [list(range(len(b) + 1))] + [[i] + [0] * len(b) for i in range(1, len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[len(a)][len(b)]
