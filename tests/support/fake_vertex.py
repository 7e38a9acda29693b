"""Google Vertex AI for the fake provider: Gemini and Claude under a project, and the OAuth token endpoint.

Vertex serves Gemini's generateContent bodies under
`/v1[beta1]/projects/{p}/locations/{l}/publishers/google/models/{m}:…` (SSE with `alt=sse`, one JSON
array without it) and Anthropic's Messages under `…/publishers/anthropic/models/{m}:rawPredict` and
`:streamRawPredict`, where the model is in the path and `anthropic_version` is required in the body
(`vertex-2023-10-16`, or the dated version newer SDKs send; a `model` field there is refused, as Vertex
refuses it). The token endpoint
(`oauth2.googleapis.com/token`, any host here) trades a refresh token or a signed JWT for an access
token, and mints a fresh random one (`ya29.fake-…`) on every call, so a test can scan for them.

Registered into the fake's ROUTES by `routes(fakeprovider_module)`: the fake runs as a script, and its
reply types must be the very classes its handler checks.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from typing import Any
from urllib.parse import parse_qs

ANTHROPIC_VERSION = re.compile(r"(?:vertex-)?\d{4}-\d{2}-\d{2}")
TOKEN_PREFIX = "ya29.fake-"  # every access token this fake mints starts so
_SCOPE = r"/v1(?:beta1)?/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/publishers"
GRANTS = {
    "refresh_token": ("client_id", "client_secret", "refresh_token"),
    "urn:ietf:params:oauth:grant-type:jwt-bearer": ("assertion",),
}


def routes(fake: Any) -> list[Any]:
    """The Vertex routes, built with the fake's own Route, Reply and handlers."""

    def claude(call: Any) -> Any:
        version = call.body.get("anthropic_version")
        if not isinstance(version, str) or not ANTHROPIC_VERSION.fullmatch(version):
            return fake.error_reply("anthropic", 400, f"anthropic_version: Field required (got {version!r})")
        if "model" in call.body:
            return fake.error_reply("anthropic", 400, "model: Extra inputs are not permitted")
        body = {**call.body, "model": call.path_params["model"],
                "stream": call.path_params["method"] == "streamRawPredict"}
        return fake.anthropic_messages(dataclasses.replace(call, body=body))

    def token(call: Any) -> Any:
        form = {k: v[0] for k, v in parse_qs(call.raw.decode("utf-8", "replace")).items()}
        needed = GRANTS.get(form.get("grant_type", ""))
        if needed is None or any(not form.get(name) for name in needed):
            return fake.Reply(400, {"error": "invalid_request",
                                    "error_description": f"unsupported or incomplete grant {form.get('grant_type')!r}"})
        minted = TOKEN_PREFIX + secrets.token_urlsafe(24)
        return fake.Reply(200, {"access_token": minted, "expires_in": 3599, "token_type": "Bearer",
                                "scope": "https://www.googleapis.com/auth/cloud-platform"})

    return [
        fake.Route("gemini", re.compile(_SCOPE + r"/google/models/(?P<model>[^/:]+):"
                                        r"(?P<method>generateContent|streamGenerateContent)"), fake.gemini_generate),
        fake.Route("anthropic", re.compile(_SCOPE + r"/anthropic/models/(?P<model>[^/:]+):"
                                           r"(?P<method>rawPredict|streamRawPredict)"), claude),
        fake.Route("openai", re.compile(r"/token"), token, raw_body=True),
    ]
