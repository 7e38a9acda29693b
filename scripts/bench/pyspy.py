"""Sample a running proxy with py-spy and say where its CPU goes: the hot functions, inclusive and self.

`py-spy record --format raw` writes one line per distinct stack, `frame;frame;… count`, each frame
`function (file:line)`. A function counts once per sample however often it is on the stack
(inclusive), and as the sample's last frame (self); samples of waiting threads are left out, and
so are the start-up frames under everything. py-spy is a dev dependency (.venv/bin/py-spy).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
# Innermost frames of a thread that waits: py-spy's idle detection misses them here (a sleeping
# thread was sampled as busy), so their samples are dropped and the shares are of the busy ones.
WAITING = {"Condition.wait", "Event.wait", "_PollLikeSelector.select", "EpollSelector.select", "BaseSelector.select",
           "_worker", "Queue.get", "SimpleQueue.get", "start_trimming.<locals>.loop", "sleep"}
# Start-up frames under every sample of their thread: left out of the table (they say nothing).
SCAFFOLD_FILES = ("<frozen runpy>", "click/core.py", "asyncio/runners.py", "mitmproxy/tools/main.py",
                  "semula/__main__.py", "semula/cli/proxy_cmd.py", "threading.py")
SCAFFOLD = {"BaseEventLoop.run_forever (asyncio/base_events.py)",
            "BaseEventLoop.run_until_complete (asyncio/base_events.py)"}
# Where a file lives, shortened to what tells the reader the package: after site-packages/ or addon/.
ROOTS = ("site-packages/", "/addon/", "/lib/python3")


def executable() -> str:
    found = Path(sys.executable).parent / "py-spy"
    return str(found) if found.exists() else shutil.which("py-spy") or "py-spy"


def attach(pid: int, out: Path, rate: int = 200) -> subprocess.Popen:
    """Start sampling `pid` (all threads, idle ones left out) into `out`; stop it with `detach`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([executable(), "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
                             "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)


def detach(proc: subprocess.Popen, timeout: float = 60.0) -> str:
    """SIGINT makes py-spy stop and write its file; return what it said."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    return (output or "").strip()


def short(path: str) -> str:
    for root in ROOTS:
        if root in path:
            tail = path.split(root, 1)[1]
            return tail.split("/", 1)[1] if root == "/lib/python3" and "/" in tail else tail
    return path


def function_of(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    return f"{match['function']} ({short(match['file'])})"


def hot_functions(raw: Path, top: int = 25) -> dict[str, Any]:
    """The `top` functions by inclusive share of the busy samples, with their self share."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = waiting = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count, frames = int(count_text), [function_of(f) for f in stack.split(";") if f]
        if frames and frames[-1].split(" (", 1)[0] in WAITING:
            waiting += count
            continue
        total += count
        for name in set(frames):
            inclusive[name] = inclusive.get(name, 0) + count
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
    scaffold = tuple(f"({f})" for f in SCAFFOLD_FILES)
    shown = {k: v for k, v in inclusive.items() if k not in SCAFFOLD and not k.endswith(scaffold)}
    ranked = sorted(shown.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"samples": total, "waiting_samples": waiting,
            "rows": [{"function": name, "inclusive": n / total, "self": own.get(name, 0) / total}
                     for name, n in ranked] if total else [],
            "top_self": [{"function": name, "self": n / total}
                         for name, n in sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))[:top]] if total else []}
