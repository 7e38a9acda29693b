"""Review recall through the real proxy: a short prompt made of common words still finds its recording.

The full-text index was built with DuckDB's English stopword list, which drops words such as
"say", "hi", "could" and "you": `Say hi` recorded, `Could you say hi` replayed proposed nothing,
so nothing was queued although the miss message showed the recording at 0.67. Each miss below
must queue the recording, with the score the miss message shows.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import openai_client, run_semula

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"
RECORDED = "Say hi"
MISSES = ("Could you say hi", "  say HI!!  ")


def ask(client, text: str) -> str:
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}])
    return completion.choices[0].message.content or ""


def open_candidates(data_dir) -> list[dict]:
    result = run_semula("review", "list", "--json", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def build_the_index(data_dir: Path) -> None:
    """Fold every recording into the stored full-text index, as a proxy that ran a while has: a new
    recording is found by a direct scan until a build, and the index is what missed these prompts."""
    from semula.engine.engine import Engine
    from semula.store.selection import StoreSpec, open_store

    engine = Engine.open(open_store(StoreSpec.parse(None, data_dir)))
    try:
        deadline = time.monotonic() + 60
        while (engine.lexical._building or not engine.lexical._built or engine.lexical._fresh) \
                and time.monotonic() < deadline:
            engine.lexical.maybe_rebuild(wait=True)
        assert engine.lexical._built and not engine.lexical._fresh, "the index was never built"
    finally:
        engine.close()


def test_stopword_and_case_only_prompts_are_queued_with_the_miss_messages_score(proxy_factory: ProxyFactory) -> None:
    recorder = proxy_factory("auto")
    ask(openai_client(recorder.proxy_url, recorder.ca_path), RECORDED)
    recorder.stop()
    build_the_index(recorder.data_dir)

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path)
    shown: dict[str, float] = {}
    for text in MISSES[:2]:
        with pytest.raises(openai.NotFoundError) as miss:
            ask(client, text)
        found = re.search(r"similarity (\d\.\d+)", str(miss.value))
        assert found, str(miss.value)
        shown[text] = float(found.group(1))
    queued = {c["request"]: round(c["score"], 2) for c in open_candidates(replay.data_dir)}
    assert queued == {text.strip(): score for text, score in shown.items()}, (queued, shown)
