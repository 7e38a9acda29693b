"""Building chat requests and recordings for tests that use a real store."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.redact import FingerprintKey
from semula.core.request.ignore import NO_IGNORE, IgnoreRules
from semula.core.settings import ProjectSettings
from semula.recordings.entry import Answer, recording_of
from semula.providers import adapter_for
from semula.providers.base import RawRequest, Usage
from semula.store.types import NewEntry


# The salt of the tests' redacted secrets (a store brings its own: `Engine.fingerprint_key`).
TEST_KEY = FingerprintKey(bytes(range(32)))


def chat(content: Any, key: FingerprintKey = TEST_KEY, **params: Any) -> CanonicalRequest:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}], **params}
    raw = RawRequest("POST", "api.openai.com", "/v1/chat/completions", (), {}, json.dumps(body).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw, key)


def new_entry(c: CanonicalRequest, project: str = "p", scrub_patterns=(), ignore_params=(), scrub_keys=(),
              ignore: IgnoreRules = NO_IGNORE, body: bytes = b'{"ok": true}', **fields: Any) -> NewEntry:
    """A recording of ``c``, built as the proxy builds one; ``fields`` override any NewEntry field (e.g. request_fp)."""
    settings = ProjectSettings(scrub_patterns=tuple(scrub_patterns), ignore_params=tuple(ignore_params),
                               scrub_keys=tuple(scrub_keys), ignore=ignore)
    answer = Answer(host="api.openai.com", body=body, usage=Usage(1, 2), upstream_ms=3.0)
    entry = recording_of(project, c, settings, answer,
                         fingerprints=fingerprints(c, scrub_patterns, ignore_params, scrub_keys, ignore))
    return replace(entry, **fields) if fields else entry


def fingerprints(c: CanonicalRequest, scrub_patterns=(), ignore_params=(), scrub_keys=(),
                 ignore: IgnoreRules = NO_IGNORE) -> tuple[str, str]:
    return request_fingerprint(c, ignore), normalised_fingerprint(c, scrub_patterns, ignore_params, scrub_keys, ignore)
