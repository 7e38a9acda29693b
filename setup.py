"""One build step that pyproject.toml cannot say: the wheel carries the analysis notebooks.

The notebooks live in analysis/ at the repo root, and only there: people open and edit them
there in Jupyter. `semula report` runs them, so a wheel needs a copy. setuptools cannot map a
folder outside addon/ into a package without listing every package by hand, and that would also
turn the editable install into an import hook. So build_py copies the notebooks and their loader
(semula_logs.py) into semula/reporting/notebooks/ of the build. MANIFEST.in puts analysis/ in the
sdist, so a wheel built from the sdist has them too. An editable install copies nothing: the
report reads the checkout's analysis/ (semula.reporting.report.analysis_dir).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ANALYSIS = Path(__file__).resolve().parent / "analysis"
LOADER = "semula_logs.py"  # the notebooks import it from their own folder


class BuildPyWithNotebooks(build_py):
    """setuptools' build_py, then analysis/*.ipynb and semula_logs.py into semula/reporting/notebooks/."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        notebooks = sorted(ANALYSIS.glob("*.ipynb"))
        if not notebooks or not (ANALYSIS / LOADER).is_file():
            raise SystemExit(f"setup.py: no notebooks or no {LOADER} in {ANALYSIS}; a wheel without them "
                             "could not run `semula report`")
        target = Path(self.build_lib, "semula", "reporting", "notebooks")
        self.mkpath(str(target))
        for source in [*notebooks, ANALYSIS / LOADER]:
            self.copy_file(str(source), str(target / source.name))


setup(cmdclass={"build_py": BuildPyWithNotebooks})
