"""Where the team's shared material (../shared: corpus, models) is, wherever the repo was cloned.

The hand-written dev pairs are vendored in tests/data so the suite never silently skips them
on a clone that lives outside the team folder.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


def shared_dir() -> Path | None:
    candidates = [os.environ.get("SEMULA_SHARED_DIR"), REPO.parent / "shared", Path("/work/shared")]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def corpus_file(name: str) -> Path:
    shared = shared_dir()
    if shared is not None and (shared / "corpus" / name).is_file():
        return shared / "corpus" / name
    return DATA / name


def import_path(name: str, path: Path):
    """Import a file that is not part of the package (scripts/, analysis/) as module `name`."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
