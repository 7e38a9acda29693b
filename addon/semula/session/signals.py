"""SIGTERM and SIGHUP end a run as Ctrl-C does: the proxy stopped, the call log flushed, a summary.

A CI runner cancels a job with SIGTERM (a closed terminal sends SIGHUP). Python's default for both is to
die at once, which leaves the run's proxy serving and its last calls unlogged. While `StopSignals` is
installed, the first of them raises an exception in the main thread (`semula exec`: `Stopped`; the pytest
plugin: pytest's own exit), so the run unwinds through the code that stops the proxy. Once the run is
stopping (`hold`), further signals are only remembered: they must not interrupt the stop itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Stopped(Exception):
    """The run got a stop signal; it exits with the shell's code for it (128 + the signal's number)."""

    def __init__(self, signo: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signo).name}")
        self.signo = signo

    @property
    def exit_code(self) -> int:
        return 128 + self.signo


class StopSignals:
    """Handlers for `signals` (STOP_SIGNALS unless told) that raise `make(signo)` once; `restore` puts the
    previous ones back."""

    def __init__(self, make: Callable[[int], BaseException] = Stopped,
                  signals: tuple[int, ...] = STOP_SIGNALS) -> None:
        self.make = make
        self.signals = signals
        self.received: int | None = None
        self.holding = False
        self.previous: dict[int, Any] = {}

    def install(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # Python's rule for signal handlers
            for signo in self.signals:
                self.previous[signo] = signal.signal(signo, self._handle)
        return self

    def hold(self) -> None:
        """The run is stopping: from now on a signal is remembered, never raised."""
        self.holding = True

    @property
    def exit_code(self) -> int | None:
        return 128 + self.received if self.received else None

    def restore(self) -> None:
        for signo, handler in self.previous.items():
            signal.signal(signo, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
        self.previous.clear()

    def _handle(self, signo: int, frame: FrameType | None) -> None:
        first = self.received is None
        self.received = self.received or signo
        if first and not self.holding:
            self.holding = True
            raise self.make(signo)
