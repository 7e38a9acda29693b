"""`semula eval`: the real matching pipeline over a corpus of labelled request pairs.

For each pair, in a fresh project of a temporary store, `stored` is recorded with a
synthetic answer, then `cascade()` — the proxy's own function — decides on `incoming`
(exact, normalised, alias, lexical, embedding; review queueing included). Works while a proxy runs:
the temporary store is a DuckDB database of its own, in memory (or a throwaway schema on a server store).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import Answered, NearQuery, NearSearch, cascade, run_now
from semula.core.explain import declared_rules, ignore_taken
from semula.core.decision import Match
from semula.core.modes import Mode
from semula.core.redact import FingerprintKey
from semula.engine.engine import Engine
from semula.recordings.entry import Answer, recording_of
from semula.providers import adapter_for, first_host
from semula.providers.base import RawRequest
from semula.core.settings import ProjectSettings, settings_from_mapping
from semula.core.tiers import NO_TIER
from semula.store.selection import StoreSpec, throwaway_store


def load_pairs(path: Path) -> list[dict[str, Any]]:
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    pairs.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{number}: not a JSON line ({e})") from None
    return pairs


def canonical_of(side: dict[str, Any], key: FingerprintKey) -> CanonicalRequest:
    # The provider's own host from the registry; one with none to name (unknown, wildcards only) is read as OpenAI.
    host = first_host(side.get("provider", "openai")) or "api.openai.com"
    raw = RawRequest("POST", host, side["path"], (), {}, json.dumps(side["body"]).encode())
    return adapter_for(host, side["path"]).canonicalise(raw, key)


class EngineLookups:
    """The cascade's lookups, answered by an engine on this thread (eval has no event loop)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def certain(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        return self.engine.match(project, request_fp, normalised_fp)

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        return False

    async def recording_in_flight(self, project: str, fingerprint: str) -> bool:
        return False

    async def answer(self, entry_id: int) -> Answered | None:
        return Answered(None)  # eval serves nothing: the hit is the verdict, and it never expires

    def now(self) -> datetime:
        return datetime.min  # never asked: the recording has no time

    async def near(self, query: NearQuery) -> NearSearch:
        if self.engine.embeddings is not None:
            self.engine.embeddings.worker.drain(30)  # the stored side's vector must exist first
        return self.engine.searcher.search(query)


def decide_pair(engine: Engine, project: str, stored: CanonicalRequest, incoming: CanonicalRequest,
                settings: ProjectSettings) -> dict[str, Any]:
    """Record `stored`, then run the proxy's cascade on `incoming`.

    Returns the outcome (served|review|miss), the tier, the score and, from the best near-match
    candidate, why it was not served (`reason`) and the guard's verdict (`guard_reason`).
    """
    engine.record(recording_of(project, stored, settings, Answer(host="eval", body=b'{"synthetic": true}'),
                               key=engine.fingerprint_key))
    outcome = run_now(cascade(Mode.AUTO, project, incoming, settings, EngineLookups(engine)))
    best = outcome.near.best if outcome.near is not None else None
    verdict = best.verdict if best is not None else None
    row: dict[str, Any] = {"outcome": "miss", "tier": verdict.tier if verdict else NO_TIER,
                           "score": verdict.score if verdict else None,
                           "reason": verdict.reason if verdict else None,
                           "guard_reason": verdict.guard_reason if verdict else None}
    if settings.ignore:  # what semula_ignore left out of this pair's fingerprints (either side)
        row["ignored"] = ignore_taken(stored, incoming, rules=settings.ignore)
    if outcome.decision.action == "serve":
        row.update(outcome="served", tier=outcome.decision.tier_label, score=outcome.decision.score)
    elif outcome.near is not None and outcome.near.queued:
        queued = outcome.near.queued[0].verdict
        row.update(outcome="review", tier=queued.tier, score=queued.score)
    elif outcome.near_bypass_reason and not verdict:
        row["reason"] = f"near-match tiers bypassed: {outcome.near_bypass_reason}"
    return row


def _pair_number(pair_id: str) -> int | None:
    found = re.search(r"(\d+)$", pair_id or "")
    return int(found.group(1)) if found else None


def summarise(results: Iterable[tuple[dict[str, Any], str, str]]) -> dict[str, Any]:
    by_category: dict[str, dict[str, Any]] = defaultdict(lambda: {"n": 0, "served": 0, "review": 0, "miss": 0,
                                                                   "served_by_tier": Counter()})
    totals: dict[str, Counter] = defaultdict(Counter)
    for pair, outcome, tier in results:
        group = by_category[pair["category"]]
        group["n"] += 1
        group[outcome] += 1
        if outcome == "served":
            group["served_by_tier"][tier] += 1
        number = _pair_number(pair.get("id", ""))
        for scope in ("all", *(() if number is None else ("odd_ids" if number % 2 else "even_ids",))):
            totals[scope][(pair["expect"], outcome)] += 1
    def rates(c: Counter) -> dict[str, Any]:
        same = sum(v for (e, _), v in c.items() if e == "same")
        different = sum(v for (e, _), v in c.items() if e == "different")
        return {
            "pairs": same + different,
            "hit_rate": c[("same", "served")] / same if same else None,
            "false_hit_rate": c[("different", "served")] / different if different else None,
            "review_recall": (c[("same", "served")] + c[("same", "review")]) / same if same else None,
            "different_queued": c[("different", "review")],
        }
    overall = rates(totals["all"])
    return {
        **overall,
        "by_category": {k: {**v, "served_by_tier": dict(v["served_by_tier"])} for k, v in sorted(by_category.items())},
        "by_id_parity": {scope: rates(totals[scope]) for scope in ("odd_ids", "even_ids") if totals[scope]},
    }


def _embedder_if_on(data_dir: Path) -> Any:
    """`semula eval` uses the embedding tier when SEMULA_EMBEDDINGS=on, like the proxy."""
    from semula.embeddings.model import Embedder, config_from_env

    config = config_from_env(data_dir)
    return Embedder.load(config) if config.enabled else None


def pair_line(pair: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """One line of `--pairs-out`: the pair's label and what the cascade did with it."""
    score = row.get("score")
    return {"id": pair.get("id"), "category": pair.get("category"), "expect": pair.get("expect"),
            "outcome": row["outcome"], "tier": row["tier"], "score": None if score is None else round(score, 4),
            "reason": row.get("reason"), "guard_reason": row.get("guard_reason"), "note": pair.get("note"),
            **({"ignored": row["ignored"]} if "ignored" in row else {})}


def evaluate(path: Path, overrides: dict[str, Any] | None = None,
             progress: Callable[[int, int], None] | None = None,
             pairs_out: Callable[[dict[str, Any]], object] | None = None, store: str | None = None,
             learnt: Mapping[str, Mapping[str, float]] | None = None, only: Callable[[int], bool] | None = None) -> dict[str, Any]:
    """Run every pair; `pairs_out` receives one `pair_line` per pair, in file order.

    `learnt`: calibrated mode's {tier: {stratum: threshold}} for every pair's project (each pair is a fresh
    project without verdicts of its own); `only(index)` picks the pairs to run (a held-out split).

    `store`: a Postgres URL; the pairs are recorded in a throwaway schema there, dropped at the end."""
    pairs = load_pairs(path)
    settings = settings_from_mapping(overrides or {})
    results = []
    ignored_in = 0  # pairs in which semula_ignore changed a fingerprint
    with (tempfile.TemporaryDirectory(prefix="semula-eval-") as tmp,
          throwaway_store(StoreSpec.parse(store, tmp)) as opened):
        engine = Engine.open(opened, embedder=_embedder_if_on(Path(tmp)))
        if learnt is not None:
            fixed = {tier: dict(by_stratum) for tier, by_stratum in learnt.items()}
            engine.searcher.learnt = lambda _store, _project, _settings: fixed
        try:
            for index, pair in enumerate(pairs):
                if only is not None and not only(index):
                    continue
                try:
                    key = engine.fingerprint_key
                    stored, incoming = canonical_of(pair["stored"], key), canonical_of(pair["incoming"], key)
                    row = decide_pair(engine, f"eval-{index}", stored, incoming, settings)
                except (KeyError, ValueError) as e:
                    raise ValueError(f"pair {pair.get('id', index)}: {e}") from None
                results.append((pair, row["outcome"], row["tier"]))
                if row.get("ignored"):
                    ignored_in += 1
                if pairs_out:
                    pairs_out(pair_line(pair, row))
                if progress:
                    progress(index + 1, len(pairs))
        finally:
            engine.close()
    summary = {**summarise(results), "settings": overrides or {}}
    if settings.ignore:
        summary["ignore"] = {"rules": declared_rules(settings.ignore), "pairs_affected": ignored_in}
    return summary
