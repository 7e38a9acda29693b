"""Column contracts of the Parquet logs that notebooks and `semula report` read.

The call log (`<data dir>/calls/date=YYYY-MM-DD/part-*.parquet`) gets one row per
intercepted provider call (`CallRow`); the review log (`<data dir>/reviews/date=…/part-*.parquet`)
one row per review-queue event (`ReviewEvent`). Each row is a frozen dataclass whose fields are the
columns, in order, each with its Arrow type: the schema is derived from the fields (as the store's
columns are from `NewEntry`), so the row and the schema cannot drift apart. Both carry
`schema_version` so readers can cope with files written by an older semula. Adding a column bumps
the version; readers must treat a missing column as null.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# How the `bypass_reason` of traffic semula answers itself in replay opens: never looked up, never refused. The
# proxy's own spelling is `core.decision.SIDE_CALL` / `NOT_A_CALL` (this package imports no other semula package;
# tests/unit/test_parquetlog.py keeps them equal).
SIDE_CALL_PREFIX = "side call:"  # a provider's telemetry or trace upload
NOT_A_CALL_PREFIX = "not a call:"  # MCP traffic that is no call: a notification, the GET stream, DELETE

CALL_LOG_SCHEMA_VERSION = 4  # 2: run_id; 3: fast; 4: mcp_server, mcp_tool
REVIEW_LOG_SCHEMA_VERSION = 2  # 2: stratum, calibrates

_ARROW = "arrow"  # a field's metadata key: its column's Arrow type, by name (`arrow_schema`)


def _column(kind: str, default: Any = MISSING) -> Any:
    """A field that is a column of Arrow type `kind` (without `default`: every row must give it).

    The type goes by name: pyarrow (with numpy, ~0.15 s) loads when a log is first written or read, not
    when the proxy imports the rows it builds, before it says it is ready."""
    return field(default=default, metadata={_ARROW: kind})


def _optional(kind: str) -> Any:
    """A column of `kind` that may be null (None unless given)."""
    return _column(kind, None)


def _timestamp() -> Any:
    return field(default_factory=lambda: datetime.now(UTC), metadata={_ARROW: "timestamp"})


@dataclass(frozen=True, kw_only=True)
class LogRow:
    """A row of one of the Parquet logs (a frozen dataclass built with `_column`)."""

    def as_dict(self, **changes: Any) -> dict[str, Any]:
        """The row by column name (one dict, no deep copy: the writer takes it as it is)."""
        return {**vars(self), **changes}


_SCHEMAS: dict[str, pa.Schema] = {}


def arrow_schema(row: type[LogRow]) -> pa.Schema:
    """The Arrow schema of a row type: its fields, in order, with their columns' types (made once)."""
    import pyarrow as pa  # here, not at the top: see `_column`

    def arrow_type(name: str) -> pa.DataType:
        return pa.timestamp("us", tz="UTC") if name == "timestamp" else getattr(pa, name)()

    key = f"{row.__module__}.{row.__qualname__}"
    if key not in _SCHEMAS:
        _SCHEMAS[key] = pa.schema([(f.name, arrow_type(f.metadata[_ARROW])) for f in fields(row)])
    return _SCHEMAS[key]


@dataclass(frozen=True, kw_only=True)
class CallRow(LogRow):
    """One intercepted provider call (`proxy.call.calllog.call_row`, and a Realtime conversation's)."""

    ts: datetime = _timestamp()  # when the request arrived (not when its flow ended)
    project: str | None = _optional("string")
    provider: str | None = _optional("string")
    host: str | None = _optional("string")
    method: str | None = _optional("string")
    path: str | None = _optional("string")  # without the query string: it can carry secrets
    model: str | None = _optional("string")
    mode: str | None = _optional("string")  # auto | replay | record | passthrough
    decision: str | None = _optional("string")  # hit | miss | bypass | error | passthrough
    # exact | normalised | alias | lexical | embedding | <tier>-calibrated | none
    tier: str | None = _optional("string")
    score: float | None = _optional("float64")
    entry_id: int | None = _optional("int64")
    bypass_reason: str | None = _optional("string")
    streamed: bool | None = _optional("bool_")
    status: int | None = _optional("int32")
    decision_ms: float | None = _optional("float64")
    upstream_ms: float | None = _optional("float64")
    recorded_upstream_ms: float | None = _optional("float64")
    recorded_prompt_tokens: int | None = _optional("int64")
    recorded_completion_tokens: int | None = _optional("int64")
    request_fp: str | None = _optional("string")
    normalised_fp: str | None = _optional("string")
    prompt_tokens: int | None = _optional("int64")
    completion_tokens: int | None = _optional("int64")
    candidate_tier: str | None = _optional("string")
    candidate_score: float | None = _optional("float64")
    candidate_entry_id: int | None = _optional("int64")
    guard_reason: str | None = _optional("string")
    recorded: bool | None = _optional("bool_")  # this call's answer was stored as a recording
    error: str | None = _optional("string")
    run_id: str | None = _optional("string")  # one proxy process: `semula recordings unused` reads the last run
    # a hit served by the raw-request fast path (tier: the one that matched first)
    fast: bool | None = _optional("bool_")
    # MCP traffic (`semula_mcp_servers`): the server as its recordings are keyed (host and path), and the
    # tool a `tools/call` names (null for other methods: their method and target are in `model`)
    mcp_server: str | None = _optional("string")
    mcp_tool: str | None = _optional("string")
    schema_version: int = _column("int32", CALL_LOG_SCHEMA_VERSION)


@dataclass(frozen=True, kw_only=True)
class ReviewEvent(LogRow):
    """One review-queue event (`engine.review.ReviewQueue`)."""

    ts: datetime = _timestamp()
    event: str = _column("string")  # queued | approved | rejected | closed
    candidate_id: int = _column("int64")
    project: str = _column("string")
    tier: str = _column("string")
    score: float = _column("float64")
    guard_reason: str | None = _optional("string")
    request_fp: str = _column("string")  # the request's normalised fingerprint
    entry_id: int = _column("int64")
    # the pair's language stratum (`engine.calibrated.verdict_stratum`), on approved and rejected events
    stratum: str | None = _optional("string")
    # whether the verdict teaches calibrated mode (`core.calibration.counts_for_calibration`)
    calibrates: bool | None = _optional("bool_")
    schema_version: int = _column("int32", REVIEW_LOG_SCHEMA_VERSION)


def __getattr__(name: str) -> Any:
    """CALL_LOG_SCHEMA and REVIEW_LOG_SCHEMA, made when first asked for (they need pyarrow)."""
    rows: dict[str, type[LogRow]] = {"CALL_LOG_SCHEMA": CallRow, "REVIEW_LOG_SCHEMA": ReviewEvent}
    if name in rows:
        return arrow_schema(rows[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
