"""Google Vertex AI: Gemini and Anthropic's Claude models served under a Google Cloud project.

The bodies are the providers' own, so each is read by their adapter's reading: Gemini's
``generateContent`` (``publishers/google/models/{model}:streamGenerateContent``) by
:class:`GeminiAdapter` with Vertex's paths, Anthropic's Messages body
(``publishers/anthropic/models/{model}:streamRawPredict``) by :class:`AnthropicAdapter` with the
model and the streaming choice taken from the path (``anthropic_version`` stays in the body, so it
counts in every fingerprint). The project and the location are in the path, which is the
fingerprint's endpoint: the same prompt to another project or region is another request.

Streams: Gemini on Vertex streams SSE with ``?alt=sse`` (which stays in the query, and so in the
fingerprint) and one JSON array without it; ``streamRawPredict`` streams Anthropic's SSE events.

Auth is an OAuth bearer token (``authorization: Bearer ya29…``), dropped like every credential
header (``core.redact``) and never read here. The token exchanges that mint it are side calls
(``providers/googleauth.py``).

Hosts: ``aiplatform.googleapis.com`` (the ``global`` location), ``<region>-aiplatform.googleapis.com``
(the ``*-`` wildcard: one label before ``-aiplatform``, never a look-alike) and the multi-region
``aiplatform.us.rep.googleapis.com`` and ``aiplatform.eu.rep.googleapis.com``.
"""

from __future__ import annotations

import re
from typing import Any

from semula.providers.anthropic import AnthropicAdapter
from semula.providers.auth import Auth, NotResendable
from semula.providers.base import RawRequest
from semula.providers.gemini import GeminiAdapter

__all__ = ["VERTEX_GEMINI_PATH", "VERTEX_HOSTS", "VertexAnthropicAdapter", "vertex_gemini"]

VERTEX_HOSTS: tuple[str, ...] = (
    "aiplatform.googleapis.com",
    "*-aiplatform.googleapis.com",
    "aiplatform.us.rep.googleapis.com",
    "aiplatform.eu.rep.googleapis.com",
)
# google-genai calls v1beta1; the REST reference documents v1. Without projects/…/locations/… it is
# Vertex's express mode (an API key in x-goog-api-key instead of a token).
_SCOPE = r"^/v1(?:beta1)?/(?:projects/[^/:]+/locations/[^/:]+/)?"
VERTEX_GEMINI_PATH = re.compile(
    _SCOPE + r"publishers/google/models/(?P<model>[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent|countTokens)$"
)
_ANTHROPIC_PATH = re.compile(
    r"^/v1(?:beta1)?/projects/[^/:]+/locations/[^/:]+/publishers/anthropic/models/(?P<model>[^/:]+):"
    r"(?P<method>rawPredict|streamRawPredict)$"
)
_COUNT_TOKENS_MODEL = "count-tokens"  # …/models/count-tokens:rawPredict: the model is in the body


def vertex_gemini() -> GeminiAdapter:
    """Gemini on Vertex AI: Gemini's reading, Vertex's hosts and paths."""
    return GeminiAdapter("vertex-gemini", VERTEX_HOSTS, VERTEX_GEMINI_PATH, auth=NotResendable("Google-OAuth"))


class VertexAnthropicAdapter(AnthropicAdapter):
    """Claude on Vertex AI: Anthropic's reading; the model and streaming are in the path."""

    name = "vertex-anthropic"
    hosts = VERTEX_HOSTS
    side_paths = ()

    def auth(self) -> Auth:
        return NotResendable("Google-OAuth")

    def _handles_path(self, path: str) -> bool:
        return _ANTHROPIC_PATH.match(path) is not None

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        m = _ANTHROPIC_PATH.match(raw.path)
        if m is None or m.group("model") == _COUNT_TOKENS_MODEL:
            return super()._model(raw, body)
        return m.group("model")

    def streams(self, raw: RawRequest, body: Any) -> bool:
        return raw.path.endswith(":streamRawPredict")
