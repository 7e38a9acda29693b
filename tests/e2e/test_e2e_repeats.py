"""semula_repeats=sequence: identical requests in a run are recorded as successive answers and replayed in order.

A real proxy and the fake provider (whose answer text carries its call counter): three identical
calls recorded in auto mode get three different answers; a replay proxy with the provider gone
serves them in the same order, then the last again, or, with semula_repeats_exhausted=refuse, a 404.
`x-semula-run` scopes the counting, so interleaved tests keep their own sequences.
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, openai_client, uniq

pytestmark = pytest.mark.e2e


def ask(proxy: ProxyHandle, prompt: str, run: str | None = None) -> str:
    headers = {"x-semula-run": run} if run else None
    completion = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], extra_headers=headers)
    return completion.choices[0].message.content or ""


def sequence_args(recordings: Path, *more: str) -> tuple[str, ...]:
    return ("--recordings", str(recordings), "--set", "semula_repeats=sequence", *more)


def test_repeats_are_recorded_and_replayed_in_order(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    recordings = tmp_path / "semula-recordings"
    data_dir = proxy_factory.new_data_dir()
    prompt = uniq("repeat")
    recorder = proxy_factory("auto", data_dir, extra_args=sequence_args(recordings))
    recorded = [ask(recorder, prompt) for _ in range(3)]
    recorder.stop()
    assert len(set(recorded)) == 3, recorded  # three upstream calls, three answers
    files = sorted(p.name for p in recordings.rglob("*.json") if not p.name.startswith("_"))
    assert len(files) == 3 and sum(name.endswith(("-2.json", "-3.json")) for name in files) == 2, files

    replay = proxy_factory("replay", data_dir, upstream="gone", extra_args=sequence_args(recordings))
    assert [ask(replay, prompt) for _ in range(4)] == [*recorded, recorded[-1]]
    replay.stop()

    clean = proxy_factory("replay", proxy_factory.new_data_dir("ci"), upstream="gone",
                          extra_args=sequence_args(recordings, "--set", "semula_repeats_exhausted=refuse"))
    assert [ask(clean, prompt) for _ in range(3)] == recorded
    with pytest.raises(openai.NotFoundError, match="occurrence 4"):
        ask(clean, prompt)


def test_a_run_header_keeps_interleaved_sequences_apart(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    recordings = tmp_path / "semula-recordings"
    data_dir = proxy_factory.new_data_dir()
    prompt = uniq("runs")
    recorder = proxy_factory("auto", data_dir, extra_args=sequence_args(recordings))
    recorded = [ask(recorder, prompt, run="test-a"), ask(recorder, prompt, run="test-a")]
    recorder.stop()
    assert recorded[0] != recorded[1]

    replay = proxy_factory("replay", data_dir, upstream="gone", extra_args=sequence_args(recordings))
    interleaved = [ask(replay, prompt, run=run) for run in ("test-a", "test-b", "test-a", "test-b")]
    assert interleaved == [recorded[0], recorded[0], recorded[1], recorded[1]]
