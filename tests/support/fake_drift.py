"""Drift on purpose, for `semula drift`'s tests: the fake's OpenAI chat answer as a changed API would give it.

Only a request carrying `x-fake-drift: on` drifts (what `semula drift --header x-fake-drift:on` sends), so
the same request recorded earlier got the plain answer. Words in the prompt pick the change:
DRIFT_RENAME (message.content becomes message.text), DRIFT_NEWFIELD (a new top-level field, in each
chunk of a stream too), DRIFT_TYPE (usage.prompt_tokens becomes a string), DRIFT_ANSWER (another answer
text), DRIFT_ERROR (a 503 in OpenAI's error shape).
"""

from __future__ import annotations

import json
import re
from types import ModuleType
from typing import Any


def routes(fake: ModuleType) -> list[Any]:
    """Routes to put first: they see every OpenAI chat call and pass the undrifted ones on unchanged."""

    def drifting_chat(call: Any) -> Any:
        reply = fake.openai_chat(call)
        if call.headers.get("x-fake-drift") != "on":
            return reply
        prompt = fake.last_user_text(call.body)
        if "DRIFT_ERROR" in prompt:
            return fake.Reply(503, {"error": {"message": "fake drift: overloaded", "type": "server_error",
                                              "param": None, "code": None}})
        if isinstance(reply, fake.StreamReply):
            if "DRIFT_NEWFIELD" in prompt:
                reply.frames = [_with_field(frame) for frame in reply.frames]
            return reply
        body = reply.body
        message = body["choices"][0]["message"]
        if "DRIFT_RENAME" in prompt:
            message["text"] = message.pop("content")
        if "DRIFT_NEWFIELD" in prompt:
            body["service_tier"] = "default"
        if "DRIFT_TYPE" in prompt:
            body["usage"]["prompt_tokens"] = str(body["usage"]["prompt_tokens"])
        if "DRIFT_ANSWER" in prompt:
            message["content"] = "Completely different wording now, with nothing in common."
        return reply

    return [fake.Route("openai", re.compile(r"/v1/chat/completions"), drifting_chat)]


def _with_field(frame: str) -> str:
    head, sep, payload = frame.partition("data: ")
    try:
        data = json.loads(payload)
    except ValueError:
        return frame  # [DONE]
    return f"{head}{sep}{json.dumps({**data, 'service_tier': 'default'}, separators=(',', ':'))}\n\n"
