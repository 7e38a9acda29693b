"""Column contracts of the Parquet logs that notebooks and `semula report` read.

The call log (`<data dir>/calls/date=YYYY-MM-DD/part-*.parquet`) gets one row per
intercepted provider call; the review log (`<data dir>/reviews/date=…/part-*.parquet`)
one row per review-queue event. Both carry `schema_version` so readers can cope with
files written by an older semula. Adding a column bumps the version; readers must
treat a missing column as null.
"""

from __future__ import annotations

import pyarrow as pa

CALL_LOG_SCHEMA_VERSION = 3  # 2: run_id; 3: fast
REVIEW_LOG_SCHEMA_VERSION = 1

CALL_LOG_SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),  # when the request arrived (not when its flow ended)
        ("project", pa.string()),
        ("provider", pa.string()),
        ("host", pa.string()),
        ("method", pa.string()),
        ("path", pa.string()),  # without the query string: it can carry secrets
        ("model", pa.string()),
        ("mode", pa.string()),  # auto | replay | record | passthrough
        ("decision", pa.string()),  # hit | miss | bypass | error | passthrough
        ("tier", pa.string()),  # `Decision.tier_label`: a `core.tiers.Tier`, <tier>-calibrated or none
        ("score", pa.float64()),
        ("entry_id", pa.int64()),
        ("bypass_reason", pa.string()),
        ("streamed", pa.bool_()),
        ("status", pa.int32()),
        ("decision_ms", pa.float64()),
        ("upstream_ms", pa.float64()),
        ("recorded_upstream_ms", pa.float64()),
        ("recorded_prompt_tokens", pa.int64()),
        ("recorded_completion_tokens", pa.int64()),
        ("request_fp", pa.string()),
        ("normalised_fp", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("candidate_tier", pa.string()),
        ("candidate_score", pa.float64()),
        ("candidate_entry_id", pa.int64()),
        ("guard_reason", pa.string()),
        ("recorded", pa.bool_()),  # this call's answer was stored as a recording
        ("error", pa.string()),
        ("run_id", pa.string()),  # one proxy process: `semula recordings unused` reads the last run
        ("fast", pa.bool_()),  # a hit served by the raw-request fast path (tier: the one that matched first)
        ("schema_version", pa.int32()),
    ]
)

REVIEW_LOG_SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("event", pa.string()),  # queued | approved | rejected | closed
        ("candidate_id", pa.int64()),
        ("project", pa.string()),
        ("tier", pa.string()),
        ("score", pa.float64()),
        ("guard_reason", pa.string()),
        ("request_fp", pa.string()),
        ("entry_id", pa.int64()),
        ("schema_version", pa.int32()),
    ]
)
