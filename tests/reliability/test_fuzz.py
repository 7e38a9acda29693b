"""Fuzzed request bodies: every adapter and the cascade, then the real proxy (reliability: a fault matrix that stays).

Thousands of seeded, deterministic bodies (tests/support/fuzzbodies.py, plus hypothesis-built JSON with
`derandomize=True`) go through every adapter's `canonicalise` and the pure `cascade` in every mode.
The only exception allowed is `AdapterError` (an unparsable body: a bypass with its reason), and
every outcome is a known decision and action. A smaller set goes through a real auto-mode proxy in
front of the fake provider: no internal error, one call-log row per request, a clear status each.
"""

from __future__ import annotations

import gzip
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, read_call_log, ssl_context
from entries import TEST_KEY
from fuzzbodies import ALL_TARGETS, PROXY_TARGETS, SHAPE_KEYS, Target, mutated_bodies, seed_body
from semula.core.request.canonical import CanonicalRequest, request_fingerprint
from semula.core.cascade import cascade, run_now
from semula.core.decision import Bypass, Match
from semula.core.modes import Mode
from semula.core.settings import ProjectSettings
from semula.providers import AdapterError, adapter_for
from semula.providers.base import RawRequest
from semula.proxy.call.bodies import decode_capped

SEED = int(os.environ.get("SEMULA_FUZZ_SEED", "20240611"))
MUTATED = int(os.environ.get("SEMULA_FUZZ_BODIES", "2400"))
PROXY_BODIES = int(os.environ.get("SEMULA_FUZZ_PROXY_BODIES", "150"))
SETTINGS = ProjectSettings()
DECISIONS = {"hit", "miss", "bypass", "error", "passthrough"}
ACTIONS = {"serve", "forward", "refuse"}


@dataclass
class Lookups:
    """Answers at once (so `run_now` can drive the cascade): a hit for fingerprints seen before."""

    seen: dict[str, int] = field(default_factory=dict)

    def certain(self, project, request_fp, normalised_fp) -> Match | None:
        if request_fp in self.seen:
            return Match("exact", self.seen[request_fp])
        return None

    async def folder_changed(self, project, request, request_fp) -> bool:
        return False

    async def recording_in_flight(self, project, fingerprint) -> bool:
        return False

    async def answer(self, entry_id):
        from semula.core.cascade import Answered

        return Answered(None)

    def now(self):
        raise AssertionError("no recording here has a time")

    async def near(self, query):
        from semula.core.cascade import NearSearch

        return NearSearch()


def check_body(target: Target, body: bytes, lookups: Lookups, headers: dict[str, str] | None = None) -> str:
    """One body through its adapter and the cascade in every mode; returns "parsed", "unparsed" or "bypass"."""
    raw = RawRequest("POST", target.host, target.path, (("key", "sk-" + "q" * 30),), headers or {}, body)
    canonical: CanonicalRequest | None
    bypass = None
    try:
        canonical = adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)
    except AdapterError as e:
        assert str(e), "an AdapterError must say why"
        canonical, bypass = None, Bypass("unparsable_body", f"cannot match this request: {e}")
    if canonical is not None:
        fp = request_fingerprint(canonical)
        assert fp.startswith("fp2:"), fp
        json.dumps(canonical.to_json(), ensure_ascii=False).encode("utf-8")  # what the store writes
    for mode in Mode:
        outcome = run_now(cascade(mode, "p", canonical, SETTINGS, lookups, bypass=bypass))
        decision = outcome.decision
        assert decision.decision in DECISIONS and decision.action in ACTIONS, decision
        if bypass is not None and mode is not Mode.PASSTHROUGH:
            assert decision.decision == "bypass" and decision.reason, decision
            assert decision.action == ("refuse" if mode is Mode.REPLAY else "forward"), decision
        if mode is Mode.REPLAY and decision.action == "refuse":
            assert decision.reason, decision
    if canonical is not None:
        lookups.seen.setdefault(request_fingerprint(canonical), len(lookups.seen) + 1)
        # The same body again is an exact hit where hits are served.
        again = run_now(cascade(Mode.AUTO, "p", canonical, SETTINGS, lookups))
        assert (again.decision.decision, again.decision.action) == ("hit", "serve"), again.decision
    return "bypass" if canonical is None else ("parsed" if canonical.parsed else "unparsed")


def on_a_fresh_thread(fn):
    """Run on a new thread: a shallow stack like the proxy's event loop (pytest's own frames would make
    deep bodies fail earlier, in json.loads, and hide a RecursionError further on)."""
    import threading

    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread
            failure.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def test_seeded_mutations_of_real_bodies_through_every_adapter_and_the_cascade() -> None:
    on_a_fresh_thread(_seeded_mutations)


def _seeded_mutations() -> None:
    lookups = Lookups()
    kinds: dict[str, int] = {}
    for index, target, mutation, body in mutated_bodies(SEED, MUTATED):
        try:
            kind = check_body(target, body, lookups)
        except Exception as e:  # noqa: BLE001 - name the body that broke it
            raise AssertionError(f"body #{index} ({target.name}, {mutation}, {len(body)} bytes: "
                                 f"{body[:200]!r}) raised {type(e).__name__}: {e}") from e
        kinds[kind] = kinds.get(kind, 0) + 1
    assert sum(kinds.values()) == MUTATED >= 2000
    assert kinds.get("bypass", 0) > 100 and kinds.get("parsed", 0) > 100, kinds  # the matrix covers both sides


def test_gzip_garbage_is_refused_by_the_decoder_or_canonicalised() -> None:
    """The proxy inflates `content-encoding: gzip` bodies first: garbage is a ValueError, never worse."""
    lookups = Lookups()
    for index, target, _, body in mutated_bodies(SEED + 1, 300, huge=False):
        packed = gzip.compress(body)
        for candidate in (packed, packed[: len(packed) // 2], packed[:10] + body, body):
            try:
                inflated = decode_capped(candidate, "gzip", 32 * 2**20)
            except ValueError:
                continue
            check_body(target, inflated, lookups)


json_leaf = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
             | st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.sampled_from(("role", "content", "parts", "text", "type", "name",
                                                             "tool_calls", "function", "arguments", "image_url"))
                                            | st.text(max_size=8), inner, max_size=4),
                          max_leaves=25)
body_dict = st.dictionaries(st.sampled_from(SHAPE_KEYS) | st.text(max_size=10), json_value, max_size=8)


@settings(derandomize=True, max_examples=700, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(target=st.sampled_from(ALL_TARGETS), body=body_dict, merge=st.booleans(), ascii_only=st.booleans())
def test_hypothesis_json_bodies_through_every_adapter_and_the_cascade(target: Target, body: dict, merge: bool,
                                                                      ascii_only: bool) -> None:
    if merge:  # weird values over a real body: keeps most of the shape the adapter expects
        body = {**seed_body(target, "hypothesis question"), **body}
    raw = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    check_body(target, raw, Lookups(), headers={"anthropic-beta": "a, b", "x-semula-project": "p"})


# ---------------------------------------------------------------------------
# Through the real proxy


def _send(client: httpx.Client, target: Target, body: bytes, gzipped: bool) -> int:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-test-not-a-real-key",
               "x-api-key": "sk-ant-test-not-a-real-key"}
    if gzipped:
        headers["content-encoding"] = "gzip"
    try:
        return client.post(target.url, content=body, headers=headers).status_code
    except httpx.HTTPError as e:  # the connection itself failed: not a clear status
        return -1 if not str(e) else -2


@pytest.mark.e2e
def test_fuzzed_bodies_through_the_proxy_get_a_clear_answer_and_a_row_each(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    bodies = list(mutated_bodies(SEED + 2, PROXY_BODIES, PROXY_TARGETS, huge=False))
    statuses: list[int] = []
    with httpx.Client(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), trust_env=False, timeout=30) as c:
        def one(item: tuple[int, Target, str, bytes]) -> int:
            index, target, mutation, body = item
            gzipped = mutation == "gzip_garbage"
            return _send(c, target, body, gzipped)

        with ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(one, bodies))
    proxy.stop()
    output = proxy.output()
    assert "internal error" not in output.lower() and "Traceback" not in output, output[-4000:]
    failed = [(b[0], b[1].name, b[2], s) for b, s in zip(bodies, statuses, strict=True) if not 200 <= s < 600]
    assert not failed, failed
    # The fake provider answers a body it cannot read 400, as a real one does: any 5xx is a failure.
    assert not [s for s in statuses if s >= 500], statuses
    rows = read_call_log(proxy.data_dir)
    assert len(rows) == len(bodies), (len(rows), len(bodies), output[-3000:])
    assert {r["decision"] for r in rows} <= DECISIONS, {r["decision"] for r in rows}
    assert any(r["decision"] == "bypass" for r in rows) and any(r["decision"] in ("miss", "hit") for r in rows)
