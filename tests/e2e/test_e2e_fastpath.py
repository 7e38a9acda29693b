"""The raw-request fast path through a real `semula proxy`, driven by the openai SDK.

A replay proxy's first sight of a recorded request takes the canonical tiers; the same bytes again
take the fast path. Both must look the same to the client and in the call log, apart from the
`fast` column and the time taken.
"""

from __future__ import annotations

import re

import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, openai_client, read_call_log, semula_meta, uniq

from semula.admin.client import call
from semula.proxy.call.fastpath import FAST_ENTRY_BYTES

pytestmark = pytest.mark.e2e

PROMPT = f"fast path {uniq('fp')}"
VOLATILE = {"ts", "decision_ms", "fast"}


def chat(proxy: ProxyHandle, prompt: str = PROMPT) -> tuple[str, dict[str, str | None]]:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    return raw.parse().choices[0].message.content or "", semula_meta(raw.headers)


def test_a_fast_hit_looks_like_the_canonical_hit_before_it(proxy_factory: ProxyFactory) -> None:
    auto = proxy_factory("auto")
    recorded, meta = chat(auto)
    other, _ = chat(auto, PROMPT + " (another)")
    assert meta["x-semula-decision"] == "miss" and other != recorded
    auto.stop()
    replay = proxy_factory("replay", auto.data_dir, upstream="gone")
    answers = [chat(replay) for _ in range(3)]
    assert [chat(replay, PROMPT + " (another)")[0] for _ in range(2)] == [other] * 2
    held = call(replay.data_dir, "memory")  # what the map holds is counted with the rest (issue 12)
    assert held["fast_path_entries"] == 2 and held["fast_path_bytes"] == 2 * FAST_ENTRY_BYTES
    replay.stop()
    assert [text for text, _ in answers] == [recorded] * 3
    assert answers[0][1] == answers[1][1] == answers[2][1]
    assert answers[0][1]["x-semula-decision"] == "hit" and answers[0][1]["x-semula-tier"] == "exact"
    rows = [r for r in read_call_log(auto.data_dir) if r["mode"] == "replay"]
    assert [r["fast"] for r in rows] == [False, True, True, False, True], rows
    rows = rows[:3]
    first, *repeats = ({k: v for k, v in r.items() if k not in VOLATILE} for r in rows)
    assert all(r == first for r in repeats)
    lines = [re.sub(r"· [\d.]+ ms$", "", line) for line in replay.output().splitlines() if "→ hit" in line][:3]
    assert len(lines) == 3 and len(set(lines)) == 1, lines
