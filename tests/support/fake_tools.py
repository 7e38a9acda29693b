"""A model that calls tools, for agent tests: `POST /v1/responses` whose user input says `TOOLCALL name {args}`.

The first turn answers one `function_call` per `TOOLCALL` (call ids `call_<n>_<i>`, fixed by the fake's
counter and the order), the next turn, once the input holds the tools' `function_call_output`s, a message
quoting every output, so an agent's final answer shows what its tools returned. Other requests go to the
plain Responses route. Non-streamed only (`Runner.run` asks so).

Registered first into the fake's ROUTES by `routes(fakeprovider_module)` (see tests/support/fake_vertex.py).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

TOOL_CALL = re.compile(r"TOOLCALL (?P<name>[a-z_]{1,40}) (?P<args>\{[^{}]{0,400}\})")


def _user_text(items: list[Any]) -> str:
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def routes(fake: Any) -> list[Any]:
    def responses(call: Any) -> Any:
        items = call.body.get("input")
        wanted = TOOL_CALL.findall(_user_text(items)) if isinstance(items, list) else []
        if not wanted or call.body.get("stream"):
            return fake.openai_responses(call)
        outputs = [str(i.get("output")) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if outputs:
            text = "tool results: " + " | ".join(outputs)
            output: list[dict[str, Any]] = [{
                "id": fake.fake_id("msg_", call), "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}]
        else:
            output = [{"id": f"fc_{call.count}_{i}", "type": "function_call", "status": "completed",
                       "call_id": f"call_{call.count}_{i}", "name": name, "arguments": json.dumps(json.loads(args))}
                      for i, (name, args) in enumerate(wanted)]
        return fake.Reply(200, {
            "id": fake.fake_id("resp_", call), "object": "response", "created_at": int(time.time()),
            "status": "completed", "error": None, "incomplete_details": None,
            "instructions": call.body.get("instructions"), "max_output_tokens": None,
            "model": call.body.get("model", "gpt-fake"), "output": output, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "top_p": 1.0, "truncation": "disabled", "user": None, "metadata": {},
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15},
        })

    return [fake.Route("openai", re.compile(r"/v1/responses"), responses)]
