"""The fallback for requests no provider adapter understands.

An unknown endpoint on a provider host (image generation, file uploads, a new
API) can still be recorded and replayed byte-for-byte: the body is kept and
only the exact tier applies (``parsed=False``). Stream ends and token usage
are recognised if they look like any known provider's.
"""

from __future__ import annotations

from typing import Any

from semula.core.request.canonical import CanonicalRequest
from semula.providers.anthropic import AnthropicAdapter
from semula.providers.auth import Auth, NotResendable
from semula.providers.base import Adapter, RawRequest, Usage
from semula.providers.gemini import GeminiAdapter
from semula.providers.openai import OpenAIAdapter

__all__ = ["GenericAdapter"]

_KNOWN = (OpenAIAdapter(), AnthropicAdapter(), GeminiAdapter())


class GenericAdapter(Adapter):
    name = "generic"

    def handles(self, host: str, path: str) -> bool:
        return True

    def auth(self) -> Auth:
        return NotResendable("not a provider call")

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        return self.unparsed(raw, body)

    def stream_complete(self, frames: list[bytes]) -> bool:
        return any(adapter.stream_complete(frames) for adapter in _KNOWN)

    def usage_from_body(self, body: bytes) -> Usage:
        return self._first_usage([adapter.usage_from_body(body) for adapter in _KNOWN])

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        return self._first_usage([adapter.usage_from_frames(frames) for adapter in _KNOWN])

    @staticmethod
    def _first_usage(candidates: list[Usage]) -> Usage:
        """The reading that found the most counts (the first on a tie)."""

        def known(usage: Usage) -> int:
            return (usage.prompt_tokens is not None) + (usage.completion_tokens is not None)

        return max(candidates, key=known, default=Usage())
