"""Google's OAuth token exchanges: side calls that are never recorded, answered locally in replay.

google-auth (under google-genai with ``vertexai=True`` and ``anthropic[vertex]``) trades a refresh
token, a service account's signed JWT or an external account's subject token for a short-lived
access token at ``oauth2.googleapis.com/token``. The request body holds the long-lived secret and
the answer holds the token, so neither may reach a recording or a log: the exchange is a side call
(``providers/sidepaths.py``), forwarded untouched in record and auto and logged as ``bypass``
without its body. Replay answers it with a placeholder token, so a client runs offline with the
placeholder credentials ``semula env``/``semula exec`` give a replay run (``session/google_env.py``):
no real token is ever minted in replay, and none is ever stored in any mode.

Only ``oauth2.googleapis.com`` is intercepted by default (replay needs it; nothing else is served
there). ``www.googleapis.com`` (``/oauth2/v4/token``, older credentials), ``accounts.google.com``
and ``sts.googleapis.com`` (workload identity federation) serve other things too: their token
paths are side calls only when a project adds the host (``--extra-host``). The metadata server
(``metadata.google.internal``, plain HTTP) is never intercepted.
"""

from __future__ import annotations

import json

from semula.providers.auth import Auth, NotResendable
from semula.providers.base import Adapter
from semula.providers.sidepaths import SidePath

__all__ = ["PLACEHOLDER_TOKEN", "GoogleOAuthAdapter", "GoogleTokenPathsAdapter"]

# What replay answers a token exchange: google-auth takes it as a fresh token valid for an hour.
PLACEHOLDER_TOKEN = {"access_token": "semula-replay-placeholder", "expires_in": 3600, "token_type": "Bearer"}
_TOKEN_ANSWER = json.dumps(PLACEHOLDER_TOKEN).encode()
_OTHER_ANSWER = json.dumps({"error": "invalid_request", "error_description": (
    "semula replay answers only token exchanges (POST /token) on this host")}).encode()
_EXCHANGE = "Google OAuth token exchange"


class GoogleOAuthAdapter(Adapter):
    """oauth2.googleapis.com: every call is a side call; none is a model call."""

    name = "google-oauth"
    hosts = ("oauth2.googleapis.com",)
    side_paths = (
        SidePath(r"^/token$", _EXCHANGE, body=_TOKEN_ANSWER),
        # tokeninfo, revoke …: never recorded either (a token travels in their query or body)
        SidePath(r"", "Google OAuth call", status=400, body=_OTHER_ANSWER),
    )

    def _handles_path(self, path: str) -> bool:
        return False

    def auth(self) -> Auth:
        return NotResendable("an OAuth exchange")


class GoogleTokenPathsAdapter(Adapter):
    """The token paths of Google hosts that serve other APIs too: read only on a host a project adds."""

    name = "google-oauth"
    hosts = ("www.googleapis.com", "accounts.google.com", "sts.googleapis.com")
    intercepted_by_default = False
    side_paths = (
        SidePath(r"^/oauth2/v[34]/token$", _EXCHANGE, body=_TOKEN_ANSWER),  # www.googleapis.com
        SidePath(r"^/o/oauth2/token$", _EXCHANGE, body=_TOKEN_ANSWER),  # accounts.google.com
        SidePath(r"^/v1(?:beta)?/token$", "Google STS token exchange", body=_TOKEN_ANSWER),  # sts.googleapis.com
    )

    def _handles_path(self, path: str) -> bool:
        return False

    def auth(self) -> Auth:
        return NotResendable("an OAuth exchange")
