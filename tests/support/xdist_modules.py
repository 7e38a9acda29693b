"""pytest-xdist scheduling for this suite: a module whose tests share state stays on one worker.

A module with a module-, class- or package-scoped fixture (or module_proxy_factory, or an xdist_group
mark) shares a proxy or recordings across its tests, and a later test may rely on an earlier test's
calls; split across workers, each worker would start the shared proxy again and see only its own
calls. Such a module is one unit of work; every other test goes on its own to whichever worker is free.

xdist's own `loadgroup` cannot do this here: it learns a test's group from a suffix its worker
appends to the node id, which pytest 9.2's structured node ids no longer carry (pytest-xdist #1386),
and the controller that schedules never collects, so it reads the modules' source instead.

The units go out longest first (the classic longest-processing-time rule): a unit's weight is its
number of tests times a typical test's seconds in its folder, so a 50 s corpus test in tests/slow
starts with the first wave rather than in the last minute, where it alone would set the run's end.
"""

from __future__ import annotations

import re
from pathlib import Path

from xdist.scheduler import LoadGroupScheduling

# A typical test's seconds by folder (scripts/test --durations=0 on 2 cores); unknown folders count as e2e.
SECONDS_PER_TEST = {"tests/slow": 8.0, "tests/e2e": 3.0, "tests/reliability": 3.0, "tests/unit": 0.2}
SHARED_STATE = re.compile(r"""scope\s*=\s*["'](?:module|class|package)["']|module_proxy_factory|xdist_group""")


class ModuleGroupScheduling(LoadGroupScheduling):
    def __init__(self, config, log=None) -> None:  # noqa: ANN001 - xdist's own signature
        super().__init__(config, log)
        self._root = Path(config.rootpath)
        self._shared: dict[str, bool] = {}
        self._ordered = False

    def _assign_work_unit(self, node) -> None:  # noqa: ANN001 - xdist's own signature
        if not self._ordered:  # the first assignment: the work queue is complete, nothing sent yet
            self._ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: -self._weight(unit[0], len(unit[1])))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)

    @staticmethod
    def _weight(scope: str, tests: int) -> float:
        folder = "/".join(scope.split("::", 1)[0].split("/")[:2])
        return tests * SECONDS_PER_TEST.get(folder, SECONDS_PER_TEST["tests/e2e"])

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        if scope != nodeid:  # an xdist_group suffix, where xdist still sets one
            return scope
        module = nodeid.split("::", 1)[0]
        return module if self._shares_state(module) else nodeid

    def _shares_state(self, module: str) -> bool:
        if module not in self._shared:
            try:
                self._shared[module] = bool(SHARED_STATE.search((self._root / module).read_text(errors="replace")))
            except OSError:
                self._shared[module] = True  # unknown: keep its tests together, the safe side
        return self._shared[module]
