"""Placeholder Google credentials for a replay run on a machine that has none.

google-genai (``vertexai=True``) and ``anthropic[vertex]`` look for Application Default Credentials
before their first call and fail without them. A replay run whose ``GOOGLE_APPLICATION_CREDENTIALS``
is unset gets a placeholder ``authorized_user`` file written into semula's confdir: its refresh goes
to ``oauth2.googleapis.com/token``, which the replay proxy answers itself with a placeholder token
(``providers/googleauth.py``). The file holds no secret (every value is the placeholder), so it can
never mint a real token: Google refuses it, and replay never reaches Google anyway. It also keeps
google-auth from asking the metadata server or a developer's gcloud login. A variable that is set
is left alone: a real refresh in replay is still answered locally, never sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ADC_VARIABLE", "PLACEHOLDER_ADC", "google_placeholder_env", "placeholder_adc_file"]

ADC_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
_PLACEHOLDER = "semula-replay-placeholder"
PLACEHOLDER_ADC = {
    "type": "authorized_user",
    "client_id": f"{_PLACEHOLDER}.apps.googleusercontent.com",
    "client_secret": _PLACEHOLDER,
    "refresh_token": _PLACEHOLDER,
}
ADC_FILE = "semula-google-placeholder-credentials.json"


def placeholder_adc_file(confdir: Path) -> Path:
    """Write (aside, then renamed: a parallel run never reads half a file) and return the placeholder."""
    confdir = confdir.expanduser()
    confdir.mkdir(parents=True, exist_ok=True)
    path = confdir / ADC_FILE
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(PLACEHOLDER_ADC, indent=2) + "\n")
    os.replace(partial, path)
    return path


def google_placeholder_env(environ: Mapping[str, str], confdir: Path) -> dict[str, str]:
    """GOOGLE_APPLICATION_CREDENTIALS pointing at the placeholder, unless the variable is set."""
    if environ.get(ADC_VARIABLE):
        return {}
    return {ADC_VARIABLE: str(placeholder_adc_file(confdir))}
