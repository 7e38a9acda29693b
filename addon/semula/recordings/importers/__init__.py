"""`semula import --from vcr|har|mitmproxy`: other tools' recordings turned into recording files.

Each reader (`vcr`, `har`, `mitmflows`) turns one foreign file into plain `Interaction`s (or says why
an entry is unreadable); `convert` makes each one the recording file the proxy would have written
for the same call, through the same adapters, redaction and validation as the loader, or says why
it is not converted; `write` puts the files in the folder with the loader's containment rules.
Foreign files are untrusted input: a bad entry costs only itself. May import `core`, `providers`,
`store` and `recordings`; `mitmflows` reads flow files with mitmproxy's own reader.
"""

from __future__ import annotations

from semula.recordings.importers.interaction import Interaction, Unreadable

SOURCES = ("vcr", "har", "mitmproxy")

__all__ = ["SOURCES", "Interaction", "Unreadable"]
