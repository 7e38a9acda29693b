"""OpenTelemetry spans, one per call, sent over OTLP/HTTP when the user opts in (semula_otel).

Off the event loop and fail-open: `finish` hands each finished call (`CallEnd`) to a bounded queue; a
thread makes its span from the call-log row (`calllog/spans.py`) with the call's own start and end times
and gives it to the SDK's BatchSpanProcessor, which exports on its own thread. The SDK and the exporter
are imported only here, only when spans are on (the proxy's start-up imports are measured). A collector
that is down or slow costs one log line: calls never wait for it, and `done` waits at most `CLOSE_SECONDS`.

The endpoint comes from semula_otel or the user's OTEL_EXPORTER_OTLP_* variables (the exporter reads
them itself, its headers too); nothing in a recording file can change where spans go.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any

from semula.calllog.spans import (
    ENDPOINT_VARIABLES, otel_enabled, shown_endpoint, span_attributes, span_error, span_name, traces_endpoint,
)
from semula.core.settings import AddonSettings
from semula.proxy.run.spanfacts import CallEnd, span_facts

log = logging.getLogger("semula")

QUEUE_CALLS = 4096  # calls waiting for their span; past it a call's span is dropped (and counted)
CLOSE_SECONDS = 1.0  # what `done` waits for the last spans to be sent
SERVICE_NAME = "semula"  # unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another
_STOP = object()


class CallSpans:
    """The span thread and the SDK's tracer provider; `submit` is all a call pays."""

    def __init__(self, provider: Any, tracer: Any, settings: AddonSettings, endpoint: str) -> None:
        self._provider = provider
        self._tracer = tracer
        self._folder = settings.recordings is not None
        self._content = settings.otel_content
        self.endpoint = endpoint  # for log lines: scheme, host and port only
        self.dropped = 0
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()  # put without a lock: what a call pays
        self._failed = threading.Event()  # the one log line about a failed export or span is written
        self._thread = threading.Thread(target=self._run, name="semula-otel", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, settings: AddonSettings) -> CallSpans | None:
        """The spans' exporter, or None (off; the SDK disabled or missing: one line says so)."""
        if not otel_enabled(settings.otel, os.environ):
            if settings.otel != "off":
                print("semula: OpenTelemetry spans off: OTEL_SDK_DISABLED is true", flush=True)
            return None
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as e:
            print(f"semula: OpenTelemetry spans off: semula_otel is on but the SDK is not installed ({e.name or e}): "
                  "pip install 'semula[otel]'", flush=True)
            return None
        from semula.recordings.entry import semula_version

        version = semula_version()
        endpoint = traces_endpoint(settings.otel)
        shown = shown_endpoint(endpoint or _variable_endpoint())
        sdk_log = logging.getLogger("opentelemetry")
        sdk_log.propagate = False  # its records repeat per batch and per retry: `_FirstFailure` says it once
        sdk_log.addHandler(_FirstFailure(shown))
        exporter = OTLPSpanExporter(endpoint=endpoint)
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        service = {} if named else {"service.name": SERVICE_NAME}
        resource = Resource.create({**service, "service.version": version})
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        print(f"semula: OpenTelemetry spans on: OTLP/HTTP to {shown}"
              f"{' (with prompt and answer text, redacted)' if settings.otel_content else ''}", flush=True)
        return cls(provider, provider.get_tracer("semula", version), settings, shown)

    def submit(self, end: CallEnd) -> None:
        """Queue a finished call's span; a full queue drops it (counted) rather than make the call wait."""
        if self._queue.qsize() < QUEUE_CALLS:
            self._queue.put(end)
        else:
            self.dropped += 1

    def _run(self) -> None:
        while (end := self._queue.get()) is not _STOP:
            assert isinstance(end, CallEnd)
            try:
                self._export(end)
            except Exception as e:  # a span is never worth a crash: say so once
                self._say_once(f"a span could not be made ({type(e).__name__}: {e}); calls are not affected")

    def _export(self, end: CallEnd) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        row = end.row
        facts = span_facts(end, folder=self._folder, content=self._content)
        span = self._tracer.start_span(span_name(row, facts), kind=SpanKind.CLIENT,
                                       start_time=int(row.ts.timestamp() * 1e9),
                                       attributes=span_attributes(row, facts))
        if (error := span_error(row, facts)) is not None:
            span.set_status(Status(StatusCode.ERROR, f"{row.decision}: {error}"))
        span.end(end_time=max(facts.end_ns, int(row.ts.timestamp() * 1e9)))

    def _say_once(self, text: str) -> None:
        if not self._failed.is_set():
            self._failed.set()
            print(f"semula: OpenTelemetry: {text}", flush=True)

    def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Make the queued spans and send what can be sent within `seconds`; a dead collector is given up on."""
        self._queue.put(_STOP)
        closing = threading.Thread(target=self._drain, name="semula-otel-close", daemon=True)
        closing.start()
        closing.join(seconds)
        if closing.is_alive():
            print(f"semula: OpenTelemetry: the last spans were not sent to {self.endpoint} within {seconds:g} s "
                  "(is the collector up?)", flush=True)
        if self.dropped:
            print(f"semula: OpenTelemetry: {self.dropped} spans dropped (more calls than the exporter kept up with)",
                  flush=True)

    def _drain(self) -> None:
        self._thread.join()
        self._provider.shutdown()


def _variable_endpoint() -> str:
    """The endpoint the exporter takes from the environment (the traces variable first)."""
    return next((value for name in ENDPOINT_VARIABLES if (value := os.environ.get(name, "").strip())), "")


class _FirstFailure(logging.Handler):
    """Takes the SDK's own log records (each failed export, each retry, repeated per batch) and says once,
    in semula's words, that the collector could not be reached."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(logging.WARNING)
        self.endpoint = endpoint
        self.said = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.said:
            self.said = True
            print(f"semula: OpenTelemetry: spans could not be sent to {self.endpoint} (collector down or refusing?); "
                  "calls are not affected, later failures are not repeated", flush=True)
