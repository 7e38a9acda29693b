"""Write a realistic synthetic call log and review log, so the notebooks and
`semula report` have something to show before real traffic exists.

Why synthetic data is shaped the way it is:
- several projects, providers and models, a cache that warms up over the weeks,
  a bad CI day where a prompt change makes replay mode miss, bypasses with
  reasons, near-match candidates with scores and guard reasons, reviewer verdicts
  that mostly agree with the guard — so every plot and table has a story;
- the oldest file is written with the PREVIOUS call-log schema (schema_version 0:
  no candidate_* / guard_reason / recorded columns), proving readers cope with
  mixed schema versions.

Files are named `part-demo-*.parquet` so re-running replaces only demo files and
never touches logs the proxy wrote. Importable: tests call `generate()`.

    .venv/bin/python scripts/make_demo_calls.py --data-dir /tmp/semula-demo
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from semula.calllog.schema import (
    CALL_LOG_SCHEMA,
    CALL_LOG_SCHEMA_VERSION,
    REVIEW_LOG_SCHEMA,
    REVIEW_LOG_SCHEMA_VERSION,
)

DEMO_PREFIX = "part-demo-"

# Columns that schema_version 0 did not have yet.
V0_MISSING_COLUMNS = ("candidate_tier", "candidate_score", "candidate_entry_id", "guard_reason", "recorded")

# The pairs' language strata by share: a verdict's is picked from its request's fingerprint, not the
# random stream, so every other column stays as a seed made it before.
STRATA = (("en", 0.7), ("de", 0.2), ("en+fr", 0.1))

# Live serve thresholds the synthetic proxy ran with; near matches below them miss.
SERVE_THRESHOLD = {"lexical": 0.92, "embedding": 0.95}

PROJECTS: dict[str, dict] = {
    "checkout-bot": {"per_day": 60, "providers": {"openai": 0.7, "anthropic": 0.3}, "replay": 0.35},
    "support-agent": {"per_day": 90, "providers": {"anthropic": 0.6, "openai": 0.2, "gemini": 0.2}, "replay": 0.25},
    "docs-search": {"per_day": 50, "providers": {"gemini": 0.6, "openai": 0.4}, "replay": 0.2},
    "eval-harness": {"per_day": 140, "providers": {"openai": 0.4, "anthropic": 0.4, "gemini": 0.2}, "replay": 0.7},
}

# model -> (weight within provider, median upstream ms)
MODELS: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {"gpt-4o-mini": (0.55, 900), "gpt-4o": (0.25, 2200), "gpt-4.1-mini": (0.15, 1100), "o3-mini": (0.05, 4200)},
    "anthropic": {"claude-3-5-haiku-latest": (0.5, 1100), "claude-sonnet-4-20250514": (0.5, 3500)},
    "gemini": {"gemini-2.0-flash": (0.7, 700), "gemini-1.5-pro": (0.3, 2500)},
}

HOSTS = {
    "openai": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
}

HIT_TIERS = {"exact": 0.68, "normalised": 0.14, "alias": 0.06, "lexical": 0.08, "embedding": 0.04}
DECISION_MS = {
    "exact": (0.8, 3),
    "normalised": (2, 5),
    "alias": (2, 6),
    "lexical": (6, 20),
    "embedding": (15, 60),
}

BYPASS_REASONS = {
    "header x-semula-no-cache": 0.35,
    "temperature 0.9 > 0.3": 0.25,
    "temperature 1.2 > 0.3": 0.1,
    "n=3 > 1": 0.1,
    "non-JSON request body": 0.05,
    "path not cacheable: /v1/files": 0.15,
}

# What a below-threshold nearest recording differs in, for replay-miss messages.
NEAR_DIFFERENCES = ["messages[1].content changed", "model gpt-4o≠gpt-4o-mini", "max_tokens 256≠512", "tools differ: +search"]

# guard reason -> probability a reviewer approves the candidate anyway
GUARD_REASONS = {
    "number 120≠220": 0.05,
    "number 3≠4": 0.1,
    "date 2025-03-01≠2025-03-08": 0.05,
    "tools differ: +search": 0.1,
    "system prompt differs": 0.45,
    "language en≠de": 0.05,
}

STORE_PROBLEMS = ["database is locked", "disk I/O error"]
SIDE_CALL_REASON = "side call: openai-agents trace upload (openai); never recorded"
REPLAY_REFUSAL_STATUS = 404  # what the addon answers in replay mode when it cannot serve
RECORD_HINT = (
    "To record it, run the test once with the proxy in auto or record mode "
    "(e.g. `semula exec --mode auto -- <test command>`), then replay again."
)


@dataclass(frozen=True)
class DemoSummary:
    """What `generate` wrote, for the CLI message and for tests."""

    data_dir: Path
    calls: int
    reviews: int
    files: int
    first_day: date
    last_day: date


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _lognormal(rng: random.Random, median: float, sigma: float = 0.5) -> float:
    return median * math.exp(rng.gauss(0, sigma))


def _fp(rng: random.Random, prefix: str) -> str:
    return f"{prefix}:{rng.getrandbits(64):016x}"


def _request(rng: random.Random, provider: str, model: str, streamed: bool) -> tuple[str, str]:
    """Return (host, path) the way each provider's SDK calls it."""
    if provider == "gemini":
        verb = "streamGenerateContent" if streamed else "generateContent"
        return HOSTS[provider], f"/v1beta/models/{model}:{verb}"
    if provider == "anthropic":
        return HOSTS[provider], "/v1/messages"
    return HOSTS[provider], "/v1/chat/completions" if rng.random() < 0.8 else "/v1/responses"


def _call_times(rng: random.Random, day: date, count: int, horizon: datetime) -> list[datetime]:
    """Spread calls over the day with a working-hours bump, never past `horizon`."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    times = []
    for _ in range(count):
        hour = rng.gauss(14, 4) if rng.random() < 0.8 else rng.uniform(0, 24)
        ts = start + timedelta(hours=min(max(hour, 0), 23.999), seconds=rng.uniform(0, 60))
        if ts <= horizon:
            times.append(ts)
    return sorted(times)


class _Generator:
    """Holds the random state and running ids while rows are produced."""

    def __init__(self, days: int, seed: int, end: date, horizon: datetime) -> None:
        self.rng = random.Random(seed)
        self.days = days
        self.first_day = end - timedelta(days=days - 1)
        self.horizon = horizon
        self.next_entry_id = 1
        self.next_candidate_id = 1
        self.fp_pool = {p: [_fp(self.rng, "fp1") for _ in range(250)] for p in PROJECTS}
        # A prompt change lands in checkout-bot a week before the end: CI replays miss.
        self.bad_ci_day = end - timedelta(days=min(6, days - 1))

    def p_hit(self, project: str, mode: str, day_index: int, day: date) -> float:
        if mode == "replay":
            return 0.4 if (project == "checkout-bot" and day == self.bad_ci_day) else 0.94
        warm = min(1.0, day_index / max(1.0, self.days * 0.7))
        return 0.3 + 0.4 * warm

    def call(self, project: str, ts: datetime, day_index: int) -> dict:
        rng = self.rng
        spec = PROJECTS[project]
        provider = _pick(rng, spec["providers"])
        model = _pick(rng, {m: w for m, (w, _) in MODELS[provider].items()})
        median_ms = MODELS[provider][model][1]
        streamed = rng.random() < 0.4
        host, path = _request(rng, provider, model, streamed)
        r = rng.random()
        mode = "replay" if r < spec["replay"] else "record" if r < spec["replay"] + 0.02 else (
            "passthrough" if r < spec["replay"] + 0.03 else "auto"
        )
        row: dict = {
            "ts": ts,
            "project": project,
            "provider": provider,
            "host": host,
            "method": "POST",
            "path": path,
            "model": model,
            "mode": mode,
            "tier": "none",
            "streamed": streamed,
            "status": 200,
            "request_fp": rng.choice(self.fp_pool[project]),
            "normalised_fp": _fp(rng, "nfp1"),
            "schema_version": CALL_LOG_SCHEMA_VERSION,
        }
        prompt = int(_lognormal(rng, 1500 if project == "eval-harness" else 900, 0.6))
        completion = int(_lognormal(rng, 250, 0.7))
        upstream = _lognormal(rng, median_ms * (1.4 if streamed else 1.0)) * (0.7 + completion / 800)

        def went_upstream(recorded: bool) -> None:
            row.update(upstream_ms=round(upstream, 1), prompt_tokens=prompt, completion_tokens=completion)
            row["recorded"] = recorded

        if rng.random() < 0.03 and mode != "replay":
            row.update(method="GET", path="/v1/models", model=None, streamed=False, decision="passthrough")
            row.update(decision_ms=round(rng.uniform(0.1, 0.5), 2), upstream_ms=round(_lognormal(rng, 150), 1))
            return row
        if mode == "replay" and provider == "openai" and ts.second % 15 == 0:  # no rng draw: the rest stays put
            row.update(path="/v1/traces/ingest", model=None, streamed=False, decision="bypass", status=204,
                       bypass_reason=SIDE_CALL_REASON, decision_ms=0.1)  # answered by semula: not a failure
            return row
        if mode == "passthrough":
            row.update(decision="passthrough", decision_ms=round(rng.uniform(0.1, 0.5), 2))
            went_upstream(False)
            return row
        if mode == "record":  # re-records on purpose: a miss that is always stored
            row.update(decision="miss", decision_ms=round(rng.uniform(0.2, 1), 2))
            went_upstream(True)
            return row
        if rng.random() < (0.01 if mode == "replay" else 0.07):
            reason = _pick(rng, BYPASS_REASONS)
            row.update(decision="bypass", bypass_reason=reason, decision_ms=round(rng.uniform(0.2, 1), 2))
            if mode == "replay":  # replay mode never reaches the network, so a bypass fails the test
                row.update(status=REPLAY_REFUSAL_STATUS, recorded=False)
                row["error"] = (
                    f"semula: this request cannot be replayed (project '{project}', mode replay): "
                    f"{reason}, and replay mode never reaches the network. {RECORD_HINT}"
                )
            else:
                went_upstream(False)
            return row
        if rng.random() < 0.004:
            problem = rng.choice(STORE_PROBLEMS)
            row.update(decision="error", decision_ms=round(rng.uniform(1, 30), 2))
            if mode == "replay":
                row.update(status=REPLAY_REFUSAL_STATUS, recorded=False)
                row["error"] = (
                    f"semula: this request cannot be replayed (project '{project}', mode replay): "
                    f"store unavailable: {problem}. {RECORD_HINT}"
                )
            else:  # auto mode fails open: forwarded, not recorded
                row["error"] = f"store unavailable, forwarding unrecorded: {problem}"
                went_upstream(False)
            return row
        day = ts.date()
        if rng.random() < self.p_hit(project, mode, day_index, day):
            tier = _pick(rng, HIT_TIERS)
            low, high = DECISION_MS[tier]
            score = round(rng.uniform(SERVE_THRESHOLD[tier], 0.995), 3) if tier in SERVE_THRESHOLD else 1.0
            row.update(decision="hit", tier=tier, score=score, entry_id=rng.randrange(1, 5000))
            row.update(decision_ms=round(rng.uniform(low, high), 2), recorded_upstream_ms=round(upstream, 1))
            row.update(recorded_prompt_tokens=prompt, recorded_completion_tokens=completion, recorded=False)
            return row
        # A miss: maybe with a near-match candidate that was below threshold or guard-blocked.
        row.update(decision="miss", decision_ms=round(rng.uniform(5, 40), 2))
        if rng.random() < (0.7 if mode == "replay" else 0.4):
            ctier = "lexical" if rng.random() < 0.65 else "embedding"
            threshold = SERVE_THRESHOLD[ctier]
            if rng.random() < 0.35:
                row.update(candidate_score=round(rng.uniform(threshold, 0.99), 3))
                row["guard_reason"] = _pick(rng, {reason: 1.0 for reason in GUARD_REASONS})
            else:
                row["candidate_score"] = round(rng.uniform(0.6, threshold - 0.001), 3)
            row.update(candidate_tier=ctier, candidate_entry_id=rng.randrange(1, 5000))
        if mode == "replay":  # the addon's miss message, so the report shows what CI saw
            if row.get("candidate_tier"):
                nearest = (
                    f"Nearest recording: #{row['candidate_entry_id']} (similarity {row['candidate_score']:.2f}); "
                    f"differs in: {row.get('guard_reason') or rng.choice(NEAR_DIFFERENCES)}. "
                )
            else:
                nearest = ""
            row.update(status=REPLAY_REFUSAL_STATUS, recorded=False)
            row["error"] = (
                f"semula: no recording matches this request (project '{project}', mode replay). {nearest}{RECORD_HINT}"
            )
        else:
            went_upstream(True)
        return row

    def review_events(self, call: dict) -> list[dict]:
        """Queue near misses for review; resolve most of them some hours later."""
        rng = self.rng
        score = call.get("candidate_score")
        if score is None or (score < 0.7 and not call.get("guard_reason")):
            return []
        queued_at = call["ts"] + timedelta(seconds=rng.uniform(0.05, 2))
        base = {
            "candidate_id": self.next_candidate_id,
            "project": call["project"],
            "tier": call["candidate_tier"],
            "score": score,
            "guard_reason": call.get("guard_reason"),
            "request_fp": call["request_fp"],
            "entry_id": call["candidate_entry_id"],
            "calibrates": call.get("guard_reason") is None,  # only the score held it back (a guard's reason never teaches)
            "schema_version": REVIEW_LOG_SCHEMA_VERSION,
        }
        self.next_candidate_id += 1
        events = [{**base, "ts": queued_at, "event": "queued"}]
        verdict_at = queued_at + timedelta(hours=rng.expovariate(1 / 18))
        if rng.random() < 0.1 or verdict_at > self.horizon:
            return events  # nobody looked yet
        reason = call.get("guard_reason")
        p_approve = GUARD_REASONS[reason] if reason else min(0.95, max(0.05, (score - 0.6) / 0.35))
        r = rng.random()
        event = "closed" if r < 0.08 else "approved" if rng.random() < p_approve else "rejected"
        stratum = None if event == "closed" else _stratum(call["request_fp"])
        events.append({**base, "ts": verdict_at, "event": event, "stratum": stratum})
        return events


def _stratum(request_fp: str) -> str:
    at = zlib.crc32(request_fp.encode()) / 2**32
    for stratum, share in STRATA:
        if at < share:
            return stratum
        at -= share
    return STRATA[0][0]


def _write(table: pa.Table, directory: Path, part: int, seed: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / f"{DEMO_PREFIX}{seed}-{part:05d}.parquet")


def _foreign_logs(data_dir: Path) -> list[Path]:
    return [
        p
        for sub in ("calls", "reviews")
        for p in (data_dir / sub).glob("**/*.parquet")
        if not p.name.startswith(DEMO_PREFIX)
    ]


def _remove_old_demo_files(data_dir: Path) -> None:
    for sub in ("calls", "reviews"):
        for p in (data_dir / sub).glob(f"**/{DEMO_PREFIX}*.parquet"):
            p.unlink()
            if p.parent.is_dir() and not any(p.parent.iterdir()):
                p.parent.rmdir()


def generate(
    data_dir: Path,
    days: int = 21,
    seed: int = 7,
    end: date | None = None,
    force: bool = False,
) -> DemoSummary:
    """Write `days` days of demo call and review logs ending on `end` (default today, UTC).

    Refuses to write next to logs the proxy wrote unless `force`: demo rows mixed
    into real logs would make the report lie.
    """
    data_dir = Path(data_dir)
    if days < 1:
        raise ValueError("days must be at least 1")
    if not force and (foreign := _foreign_logs(data_dir)):
        raise FileExistsError(
            f"{data_dir} already holds {len(foreign)} log file(s) not written by this script "
            f"(e.g. {foreign[0]}); use another --data-dir or --force"
        )
    now = datetime.now(UTC)
    end = end or now.date()
    horizon = now if end >= now.date() else datetime.combine(end, time.max, tzinfo=UTC)
    gen = _Generator(days, seed, end, horizon)
    _remove_old_demo_files(data_dir)

    calls_written = reviews_written = files = 0
    reviews_by_day: dict[date, list[dict]] = {}
    for day_index in range(days):
        day = gen.first_day + timedelta(days=day_index)
        weekend = day.weekday() >= 5
        rows: list[dict] = []
        for project, spec in PROJECTS.items():
            volume = spec["per_day"] * ((0.6 if project == "eval-harness" else 0.3) if weekend else 1.0)
            count = max(1, int(gen.rng.gauss(volume, volume * 0.15)))
            for ts in _call_times(gen.rng, day, count, horizon):
                rows.append(gen.call(project, ts, day_index))
        rows.sort(key=lambda row: row["ts"])
        midday = datetime.combine(day, time(12), tzinfo=UTC)
        parts = [[r for r in rows if r["ts"] < midday], [r for r in rows if r["ts"] >= midday]]
        legacy_part = day_index == 0  # the proxy was upgraded at noon on the first day
        for part, part_rows in enumerate(parts):
            if not part_rows:
                continue
            if legacy_part and part == 0:
                for row in part_rows:
                    for column in V0_MISSING_COLUMNS:
                        row.pop(column, None)
                    row["schema_version"] = 0
                legacy_schema = pa.schema([f for f in CALL_LOG_SCHEMA if f.name not in V0_MISSING_COLUMNS])
                table = pa.Table.from_pylist(part_rows, schema=legacy_schema)
            else:
                table = pa.Table.from_pylist(part_rows, schema=CALL_LOG_SCHEMA)
                for row in part_rows:
                    for event in gen.review_events(row):
                        reviews_by_day.setdefault(event["ts"].date(), []).append(event)
            _write(table, data_dir / "calls" / f"date={day.isoformat()}", part, seed)
            calls_written += len(part_rows)
            files += 1
    for day, events in sorted(reviews_by_day.items()):
        events.sort(key=lambda e: e["ts"])
        _write(pa.Table.from_pylist(events, schema=REVIEW_LOG_SCHEMA), data_dir / "reviews" / f"date={day}", 0, seed)
        reviews_written += len(events)
        files += 1
    return DemoSummary(data_dir, calls_written, reviews_written, files, gen.first_day, end)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".semula"), help="where to write calls/ and reviews/")
    parser.add_argument("--days", type=int, default=21, help="how many days of traffic (default 21)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--end", type=date.fromisoformat, default=None, help="last day, YYYY-MM-DD (default today)")
    parser.add_argument("--force", action="store_true", help="write even if non-demo logs exist there")
    args = parser.parse_args(argv)
    try:
        summary = generate(args.data_dir, args.days, args.seed, args.end, args.force)
    except (FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"wrote {summary.calls:,} calls and {summary.reviews:,} review events "
        f"({summary.first_day} … {summary.last_day}, {summary.files} files) to {summary.data_dir}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
