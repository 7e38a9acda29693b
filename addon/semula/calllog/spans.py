"""A call-log row as an OpenTelemetry span: its name, attributes and error, following the GenAI conventions.

Pure: no OpenTelemetry import (the SDK loads only when spans are on: `proxy/run/otel.py`), no clock, no
file. The proxy builds the row once (`proxy/call/calllog.py finish`) and the span is made from it on the
exporter's thread. What a span may carry is decided here, once: never a header, never a key; the prompt
and answer text only when the user opted in (`SpanFacts.input_text` is None otherwise), already redacted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from semula.calllog.schema import CallRow

AttributeValue = str | bool | int | float

# semula's provider names → the GenAI conventions' `gen_ai.provider.name` well-known values.
GENAI_PROVIDERS: dict[str, str] = {
    "openai": "openai", "azure": "azure.ai.openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai", "vertex-anthropic": "gcp.vertex_ai", "bedrock": "aws.bedrock",
}
# (endings of the call's path, gen_ai.operation.name): the first whose ending the path has
_OPERATIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("/chat/completions", "/messages", "/responses", "/converse", "/converse-stream", "/invoke",
      "/invoke-with-response-stream"), "chat"),
    (("/embeddings", ":embedContent", ":batchEmbedContents", "/embed"), "embeddings"),
    ((":generateContent", ":streamGenerateContent"), "generate_content"),
    (("/completions",), "text_completion"),
)
MCP_PROVIDER = "mcp"
OFF, ON = "off", "on"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


@dataclass(frozen=True)
class SpanFacts:
    """What a span says beyond the row, gathered where the call ends (cheap references, no work)."""

    end_ns: int  # when the call ended (the row's `ts` is when it began)
    run_id: str | None = None  # the proxy's run (the call log adds it to the row as it writes it)
    refused: bool = False  # replay refused it (or a rule did): the client got semula's error
    recording: str | None = None  # the recording file served or written, relative to the folder
    mcp_server: str | None = None
    mcp_method: str | None = None
    response_model: str | None = None
    input_text: str | None = None  # only with semula_otel_content, redacted
    output_text: str | None = None


def otel_enabled(setting: str, environ: Mapping[str, str]) -> bool:
    """Spans are on: semula_otel is not off and OTEL_SDK_DISABLED is not true (the SDK's own switch)."""
    return setting != OFF and environ.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def otel_problem(setting: str, environ: Mapping[str, str]) -> str | None:
    """Why semula_otel cannot be used as given, or None: `on` without an OTLP endpoint variable, or a
    value that is neither off, on nor an http(s) URL."""
    if setting in (OFF, ON):
        if setting == ON and not any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES):
            return ("'on' sends spans to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT or "
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, and neither is set: set one, or give the URL "
                    "(semula_otel=http://collector:4318)")
        return None
    parts = urlsplit(setting)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected off, on, or the collector's http(s) URL (http://collector:4318)"
    return None


def traces_endpoint(setting: str) -> str | None:
    """The OTLP/HTTP traces URL semula_otel gives (a base URL gets `/v1/traces`, as
    OTEL_EXPORTER_OTLP_ENDPOINT does); None for `on`: the exporter reads the variables itself."""
    if setting in (OFF, ON):
        return None
    base = setting.rstrip("/")
    return base if urlsplit(base).path not in ("", "/") else f"{base}/v1/traces"


def shown_endpoint(url: str) -> str:
    """An endpoint for a log line: scheme, host and port only (a URL may hold a password or a token)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}" if parts.hostname else "(the configured endpoint)"


def operation_name(row: CallRow, facts: SpanFacts) -> str:
    """`gen_ai.operation.name`: chat, embeddings, generate_content, …; an MCP tool call is execute_tool."""
    if row.provider == MCP_PROVIDER:
        return "execute_tool" if facts.mcp_method == "tools/call" else (facts.mcp_method or "mcp")
    path = row.path or ""
    return next((op for endings, op in _OPERATIONS if path.endswith(endings)), "http")


def span_name(row: CallRow, facts: SpanFacts) -> str:
    """`{operation} {model}` (the GenAI conventions' name); an MCP call is named by its method."""
    if row.provider == MCP_PROVIDER:
        return facts.mcp_method or "mcp"
    operation = operation_name(row, facts)
    return f"{operation} {row.model}" if row.model else operation


def span_error(row: CallRow, facts: SpanFacts) -> str | None:
    """The span's `error.type` (its status is then ERROR), or None: refused, errored, cut, or a 4xx/5xx."""
    if facts.refused:
        return "refused"
    if row.decision == "error":
        return "error"
    if row.status is None:
        return "no_response" if not row.error else "error"
    if row.status >= 400:
        return str(row.status)
    return None


def span_attributes(row: CallRow, facts: SpanFacts) -> dict[str, AttributeValue]:
    """The span's attributes: the GenAI conventions' and semula's own; a value that is None is left out."""
    provider = GENAI_PROVIDERS.get(row.provider or "", row.provider or "unknown")
    input_tokens = row.prompt_tokens if row.prompt_tokens is not None else row.recorded_prompt_tokens
    output_tokens = row.completion_tokens if row.completion_tokens is not None else row.recorded_completion_tokens
    values: dict[str, AttributeValue | None] = {
        "gen_ai.operation.name": operation_name(row, facts),
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the name before the conventions' 1.37: many backends still read it
        "gen_ai.request.model": row.model if row.provider != MCP_PROVIDER else None,
        "gen_ai.response.model": facts.response_model,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
        "server.address": row.host,
        "http.request.method": row.method,
        "http.response.status_code": row.status,
        "error.type": span_error(row, facts),
        "semula.decision": row.decision,
        "semula.refused": facts.refused,
        "semula.tier": row.tier,
        "semula.score": row.score,
        "semula.entry_id": row.entry_id,
        "semula.recording": facts.recording,
        "semula.recorded": row.recorded,
        "semula.mode": row.mode,
        "semula.project": row.project,
        "semula.provider": row.provider,
        "semula.replayed": row.decision == "hit",
        "semula.streamed": row.streamed,
        "semula.fast": row.fast,
        "semula.bypass_reason": row.bypass_reason,
        "semula.decision_ms": row.decision_ms,
        "semula.upstream_ms": row.upstream_ms,
        "semula.run_id": facts.run_id or row.run_id,
        "mcp.method.name": facts.mcp_method,
        "semula.mcp.server": facts.mcp_server,
        "semula.mcp.method": facts.mcp_method,
        "gen_ai.input.messages": facts.input_text,
        "gen_ai.output.messages": facts.output_text,
    }
    return {name: value for name, value in values.items() if value is not None}
