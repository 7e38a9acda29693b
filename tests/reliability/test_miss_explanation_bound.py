"""A replay miss's explanation is bounded (reliability item 11).

With 2,000 realistic recordings (20 KB prompts) each miss cost 11-22 s (the test keeps 150: the candidates are bounded whatever the count): `Engine.nearest` parsed
every stored request of the project and diffed whole conversations on the store thread. The
candidates now come from the indexes (the lexical proposals, then the newest of the same provider
and endpoint, at most `NEAREST_CANDIDATES`) and texts are cut before diffing.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from entries import chat, new_entry
from semula.core.explain import miss_message
from semula.engine.engine import NEAREST_CANDIDATES, Engine
from semula.store.duckdb.store import DuckDBStore

RECORDINGS = 150  # 3x NEAREST_CANDIDATES: enough to show the bound (400 took ~11 s of CPU to build, 2,000 80 s)
PROMPT_BYTES = 20_000


def _prompt(rng: random.Random, vocabulary: list[str], n: int) -> str:
    words = [rng.choice(vocabulary) for _ in range(PROMPT_BYTES // 7)]
    return f"ticket {n}: " + " ".join(words)


def _vocabulary(rng: random.Random) -> list[str]:  # letters only: the full-text index drops digits
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(50_000)]


@pytest.fixture(scope="module")
def big_engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    rng = random.Random(11)
    store = DuckDBStore.open(Path(tmp_path_factory.mktemp("nearest")))
    vocabulary = _vocabulary(rng)
    prompts = [_prompt(rng, vocabulary, n) for n in range(RECORDINGS)]
    ids = store.upsert_entries([new_entry(chat(p)) for p in prompts])
    engine = Engine.open(store)
    deadline = time.monotonic() + 300
    while not engine.lexical._built and time.monotonic() < deadline:  # the start-up build runs in the background
        engine.lexical.maybe_rebuild(wait=True)
        time.sleep(0.2)
    engine.prompts, engine.ids = prompts, ids  # type: ignore[attr-defined]
    yield engine
    engine.close()


def test_a_miss_among_many_big_recordings_names_the_recording_and_what_differs(big_engine: Engine) -> None:
    prompts = big_engine.prompts  # type: ignore[attr-defined]
    target = 121
    target_id = big_engine.ids[target]  # type: ignore[attr-defined]
    incoming = chat(prompts[target], temperature=0.9)  # same text, one parameter added
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        nearest = big_engine.nearest("p", incoming)
        timings.append(time.perf_counter() - started)
    print(f"\nnearest over {RECORDINGS} recordings of {PROMPT_BYTES // 1000} KB: "
          f"min {min(timings) * 1000:.0f} ms, max {max(timings) * 1000:.0f} ms")
    assert nearest and nearest[0].entry_id == target_id, nearest
    assert any("temperature" in d for d in nearest[0].differences), nearest[0]
    message = miss_message("p", "replay", nearest, [])
    assert f"Nearest recording: #{target_id}" in message and "temperature" in message, message


def test_a_changed_sentence_deep_in_a_big_prompt_still_finds_its_recording(big_engine: Engine) -> None:
    prompts = big_engine.prompts  # type: ignore[attr-defined]
    target_id = sorted(i for i, _ in big_engine.store.project_canonicals("p", limit=10**6))[77]
    incoming = chat(prompts[77] + " and one more line at the end")
    nearest = big_engine.nearest("p", incoming)
    assert nearest[0].entry_id == target_id, nearest
    assert any("text differs" in d for d in nearest[0].differences), nearest[0]


def test_candidates_are_bounded(big_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    import semula.engine.engine as engine_module

    real = engine_module.nearest_recordings
    monkeypatch.setattr(engine_module, "nearest_recordings",
                        lambda request, candidates, *rest: seen.append(len(candidates)) or real(request, candidates, *rest))
    big_engine.nearest("p", chat("something else entirely"))
    assert 0 < seen[0] <= NEAREST_CANDIDATES


def test_the_same_endpoint_ranks_first() -> None:
    from semula.core.explain import nearest_recordings
    from dataclasses import replace

    incoming = chat("hello there")
    other_endpoint = replace(chat("hello there"), endpoint="/v1/responses")
    nearest = nearest_recordings(incoming, [(1, other_endpoint), (2, chat("a different question entirely"))])
    assert [n.entry_id for n in nearest] == [2, 1]
