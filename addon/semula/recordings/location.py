"""Where the recordings folder is: one reading of `SEMULA_RECORDINGS` / `semula_recordings` for the proxy and the CLI."""

from __future__ import annotations

import os
from pathlib import Path

from semula.core.settings import SWITCH_OFF

# On by default, in the directory semula starts in: the folder people commit; `off` turns it off.
DEFAULT_RECORDINGS = "semula-recordings"


def recordings_location(value: str | None) -> Path | None:
    """The folder a setting names (unset: the default), or None when it turns the folder off."""
    value = (DEFAULT_RECORDINGS if value is None else value).strip()
    return None if value.lower() in SWITCH_OFF else Path(value).expanduser()


def default_folder() -> Path:
    """The folder a proxy started here records into; when that is off, the default one."""
    return recordings_location(os.environ.get("SEMULA_RECORDINGS")) or Path(DEFAULT_RECORDINGS)
