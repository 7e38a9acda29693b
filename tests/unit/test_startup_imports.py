"""What the proxy imports before it is ready (issue 35: start-up ≤ 0.8 s).

pyarrow (with numpy), DuckDB and pandas cost ~0.5 s to import; the proxy needs them only once it writes
its call log or opens its store, both after the ready line. A module that imports one of them at its top,
anywhere in the addon's import chain, would put that back before ready: these tests say which.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from semula.calllog.schema import CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, CallRow
from semula.calllog.writer import ParquetLog

pytestmark = pytest.mark.slow  # fresh interpreters: what a new process imports: the whole suite runs it, --quick does not

ADDON = Path(__file__).resolve().parents[2] / "addon"
# opentelemetry: the SDK and its exporter load only when semula_otel is on (proxy/run/otel.py)
HEAVY = ("pyarrow", "numpy", "pandas", "duckdb", "fastembed", "opentelemetry", "google.protobuf")


def loaded_after(imports: str) -> dict[str, bool]:
    code = f"{imports}; import json, sys; print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ADDON), "PATH": ""})
    return json.loads(out.stdout)


def test_the_addon_and_the_proxy_command_load_none_of_the_heavy_libraries() -> None:
    loaded = loaded_after("import semula.mitm_addon, semula.cli.proxy_cmd, semula.proxy.run.lifecycle")
    assert not any(loaded.values()), loaded


def test_the_spans_code_loads_only_when_spans_are_on() -> None:
    code = ("import semula.mitm_addon, semula.cli.proxy_cmd, semula.proxy.run.lifecycle, sys; "
            "print(sorted(m for m in sys.modules if m.startswith(('semula.proxy.run.otel', "
            "'semula.proxy.run.spanfacts', 'semula.calllog.spans'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ADDON), "PATH": ""})
    assert out.stdout.strip() == "[]"


def test_a_log_given_its_row_type_writes_the_rows_schema(tmp_path: Path) -> None:
    log = ParquetLog(tmp_path / "calls", CallRow, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    log.append(CallRow(project="p", decision="hit", status=200))
    assert log.close() == 0
    [part] = (tmp_path / "calls").rglob("*.parquet")
    table = pq.read_table(part)
    assert table.schema.equals(CALL_LOG_SCHEMA) and table.column("decision").to_pylist() == ["hit"]
