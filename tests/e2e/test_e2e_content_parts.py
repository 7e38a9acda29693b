"""Content parts through the real proxy: how many text parts a message had is part of the request.

Found by a real suite's cassettes: a message whose content is ``""`` and one with two empty text
parts joined to the same text and shared a normalised fingerprint, so one was served the other's
recorded answer. A string and one text block are the same request (served in replay); so are an
Anthropic tool_result whose content is a string and one whose content is a single text block.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, anthropic_client, openai_client, semula_meta, uniq

pytestmark = pytest.mark.e2e

RUN = uniq("parts")


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


# Each pair joins to one text, yet they are different requests.
DIFFERENT = {
    "empty": ("", [text(""), text("")]),
    "split": (f"Name two rivers ({RUN})\nin Peru", [text(f"Name two rivers ({RUN})"), text("in Peru")]),
    "moved": ([text(f"Grade this essay ({RUN})"), text("")], [text(""), text(f"Grade this essay ({RUN})")]),
}


def ask(client: Any, content: Any) -> tuple[str, dict[str, str | None]]:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": f"Run {RUN}."}, {"role": "user", "content": content}])
    return raw.parse().choices[0].message.content or "", semula_meta(raw.headers)


def test_text_parts_that_join_alike_keep_their_own_answers(proxy_factory: ProxyFactory,
                                                           fake_provider: FakeProvider) -> None:
    recorder = proxy_factory("auto")
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    answers: dict[tuple[str, int], str] = {}
    for name, sides in DIFFERENT.items():
        for index, content in enumerate(sides):
            before = fake_provider.count()
            answers[name, index], meta = ask(client, content)
            assert fake_provider.count() == before + 1, f"{name}[{index}] was served {meta}, not forwarded"
    single, _ = ask(client, f"One block ({RUN})")
    recorder.stop()

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path)
    for (name, index), answer in answers.items():
        assert ask(client, DIFFERENT[name][index])[0] == answer, f"{name}[{index}] got another's answer"
    served, meta = ask(client, [text(f"One block ({RUN})")])
    assert served == single, meta
    with pytest.raises(openai.NotFoundError, match="no recording matches"):
        ask(client, [text(f"One block ({RUN})"), text("")])


def tool_turns(result: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"What is the weather in Lima? ({RUN})"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather",
                                           "input": {"city": "Lima"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": result}]},
    ]


def test_a_tool_result_as_a_string_or_one_text_block_is_served(proxy_factory: ProxyFactory) -> None:
    recorder = proxy_factory("auto")
    client = anthropic_client(recorder.proxy_url, recorder.ca_path)
    tools = [{"name": "weather", "description": "Weather of a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    recorded = client.messages.create(model="claude-3-5-haiku-latest", max_tokens=64, tools=tools,
                                      messages=tool_turns("18 C, light rain")).content[0].text
    recorder.stop()

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = anthropic_client(replay.proxy_url, replay.ca_path)
    raw = client.messages.with_raw_response.create(model="claude-3-5-haiku-latest", max_tokens=64, tools=tools,
                                                   messages=tool_turns([text("18 C, light rain")]))
    assert raw.parse().content[0].text == recorded, semula_meta(raw.headers)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-3-5-haiku-latest", max_tokens=64, tools=tools,
                               messages=tool_turns([text("18 C, light rain"), text("")]))
