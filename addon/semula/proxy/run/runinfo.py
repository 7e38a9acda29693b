"""What a proxy was asked for, published in its admin.json, and its watch on the run that started it.

`semula exec` and the pytest plugin reuse a proxy already running on their data dir (two proxies cannot
share one store). A reused proxy must be the one the run asked for: an orphan left by a cancelled CI job,
or another run's proxy with other `--set` options, would otherwise serve this run silently with its own
(replay where auto was asked, another recordings folder). So `semula proxy` publishes what it was asked
(`requested`), the lifecycle writes it into admin.json, and a run compares it with its own (`differences`).

A proxy that a run started (`--parent-pid`) stops by itself when that run is gone (`watch_parent`): the
run starts it in a session of its own (Ctrl-C in a terminal reaches the run first, which then stops the
proxy with its call log flushed), so a `kill -9` of the run would otherwise leave it serving.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from semula.admin.protocol import pid_alive
from semula.recordings.location import recordings_location

# Options whose value is a path: the same folder named two ways is the same option.
PATH_OPTIONS = frozenset({"confdir", "semula_data_dir"})
PARENT_POLL_S = 0.5

_published: dict[str, Any] | None = None


def requested(mode: str, sets: tuple[str, ...], parent_pid: int | None = None) -> dict[str, Any]:
    """What a run asks of its proxy: the mode, the recordings folder it writes, every `--set` option's
    values (in order), and the run that owns the proxy (None: started by hand, shared on purpose)."""
    values: dict[str, list[str]] = {}
    for item in sets:
        name, _, value = item.partition("=")
        name = name.strip()
        values.setdefault(name, []).append(str(Path(value).expanduser().resolve()) if name in PATH_OPTIONS else value)
    folder = values.pop("semula_recordings", [os.environ.get("SEMULA_RECORDINGS")])[-1]  # as the option's default
    location = recordings_location(folder)
    return {"mode": mode, "recordings": str(location.resolve()) if location is not None else "off",
            "sets": values, "owner": parent_pid}


def publish(asked: dict[str, Any]) -> None:
    """`semula proxy` says what it was asked before mitmproxy starts (the addon runs in the same process)."""
    global _published
    _published = asked


def published() -> dict[str, Any] | None:
    return _published


def differences(running: Mapping[str, Any] | None, asked: Mapping[str, Any], named: set[str]) -> list[str]:
    """How the running proxy's published request differs from this run's; [] when it may be reused.

    A proxy another run started must match in every option. One started by hand (`semula proxy`,
    scripts/run) is shared on purpose and keeps its own options (README): only the options this run
    names (`named`) must match. The recordings folder must always be the one this run writes."""
    if not isinstance(running, Mapping):
        return ["its options are unknown (it was not started by this version's `semula proxy`)"]
    found: list[str] = []
    if running.get("recordings") != asked["recordings"]:
        found.append(f"recordings folder: it writes {running.get('recordings')}, this run asks for {asked['recordings']}")
    sets = running.get("sets")
    theirs: Mapping[str, Any] = sets if isinstance(sets, Mapping) else {}
    ours = asked["sets"]
    names = set(theirs) | set(ours) if running.get("owner") else named
    for name in sorted(names):
        if list(theirs.get(name) or []) != list(ours.get(name) or []):
            found.append(f"{name}: it has {_shown(theirs.get(name))}, this run asks for {_shown(ours.get(name))}")
    return found


def _shown(values: Any) -> str:
    return ", ".join(map(str, values)) if values else "the default"


def watch_parent(pid: int) -> None:
    """Stop this proxy (SIGTERM: mitmproxy shuts down, the call log is flushed) once process `pid` is gone."""
    direct = os.getppid() == pid  # a direct child sees its parent change (to init) when the parent dies

    def gone() -> bool:
        return os.getppid() != pid if direct else not pid_alive(pid)

    def run() -> None:
        while not gone():
            time.sleep(PARENT_POLL_S)
        print(f"semula: the run that started this proxy (pid {pid}) is gone: stopping", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=run, name="semula-parent-watch", daemon=True).start()

