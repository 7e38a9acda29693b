"""`semula import` never crashes, whatever the file: hostile mutations of VCR YAML, HAR JSON and flow files.

Each example imports a good file beside a mutated one in one command: the command ends with exit
status 0 or 1 and its report (never a traceback), and the good file's exchange is written. Hypothesis
runs derandomized, so a run is the same run every time.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semula.cli import main
from semula.recordings import files

CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "fuzzed prompt"}]})
ANSWER = json.dumps({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
GOOD_PROMPT = "the good one beside it"
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Values a hostile file puts where a reader expects something else: the ones that broke an import
# before (a URL that does not parse, a date past year 9999) drawn about half the time.
KNOWN = ["https://[::1/v1/chat", "https://api.openai.com:99999/v1/chat/completions", "http://", "https://",
         "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "\ud800", "gzip", "br, gzip", "zstd",
         1e300, -1e18, 10**400, float("nan"), float("inf"), -1, 0, True, None, [], {}, b"\xff\xfe"]
HOSTILE = st.one_of(
    st.sampled_from(KNOWN), st.sampled_from(KNOWN), st.sampled_from(KNOWN),
    st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.binary(max_size=40), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def vcr_doc(prompt: str = "fuzzed prompt") -> dict[str, Any]:
    return {"interactions": [{
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                    "body": CHAT.replace("fuzzed prompt", prompt),
                    "headers": {"Content-Type": ["application/json"], "Content-Encoding": ["identity"]}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Content-Type": ["application/json"], "Date": ["Mon, 01 Jan 2024 00:00:00 GMT"]},
                     "body": {"string": ANSWER}}}]}


def har_doc(prompt: str = "fuzzed prompt") -> dict[str, Any]:
    return {"log": {"version": "1.2", "entries": [{
        "startedDateTime": "2025-01-02T03:04:05Z", "time": 10,
        "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
                    "headers": [{"name": "content-type", "value": "application/json"}],
                    "postData": {"text": CHAT.replace("fuzzed prompt", prompt)}},
        "response": {"status": 200, "headers": [{"name": "content-type", "value": "application/json"}],
                     "content": {"text": ANSWER, "encoding": None}}}]}}


def leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `doc` a mutation may replace (containers too)."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += leaves(v, (*path, i))
    return out


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = replaced(doc[path[0]], path[1:], value)
    return copy


# The fields readers interpret (not just carry): drawn ten times as often as any other place.
HOT = {"url", "uri", "time", "startedDateTime", "status", "code", "string", "text", "body", "headers", "encoding",
       "Content-Encoding", "method"}


@st.composite
def mutated_doc(draw: st.DrawFn, doc: dict[str, Any]) -> Any:
    for _ in range(draw(st.integers(1, 3))):
        places = leaves(doc)[1:]  # not the whole document: its shape is what the readers check first
        places += [p for p in places if p and p[-1] in HOT] * 10
        doc = replaced(doc, draw(st.sampled_from(places)), draw(HOSTILE))
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """Byte flips, cuts and insertions of a good file."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        if kind == "flip" and at < len(out):
            out[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[at:at + draw(st.integers(1, 20))]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=12) | st.sampled_from(
                [b"&a ", b"*a", b"!!python/object:os.system", b"\x00", b"\xff\xfe", b"{" * 40, b"[" * 40, b"!!binary "]))
        else:
            del out[at:]
    return bytes(out)


def run(source: str, good: tuple[str, bytes], hostile: tuple[str, bytes]) -> None:
    """Import a good file and a hostile one together: a report and its exit status, the good one written."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / good[0]).write_bytes(good[1])
        (root / hostile[0]).write_bytes(hostile[1])
        res = CliRunner().invoke(main, ["import", "--from", source, str(root / hostile[0]), str(root / good[0]),
                                        "--recordings", str(root / "rec"), "--json"])
        assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
        report = json.loads(res.output[res.output.index("{"):res.output.rindex("}") + 1])
        assert res.exit_code == (1 if report["errors"] or report["unwritten"] else 0), report
        good_files = [p for p in (root / "rec").rglob("*.json")
                      if not p.name.startswith("_") and GOOD_PROMPT in p.read_text()]
        assert len(good_files) == 1, report


@FUZZ
@given(st.data())
def test_vcr_yaml_mutations_never_crash_the_import(data: st.DataObject) -> None:
    import yaml

    if data.draw(st.booleans()):
        hostile = yaml.dump(data.draw(mutated_doc(vcr_doc())), allow_unicode=True).encode("utf-8", "surrogatepass")
    else:
        hostile = data.draw(mutated_bytes(yaml.dump(vcr_doc()).encode()))
    run("vcr", ("good.yaml", yaml.dump(vcr_doc(GOOD_PROMPT)).encode()), ("hostile.yaml", hostile))


@FUZZ
@given(st.data())
def test_har_mutations_never_crash_the_import(data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        hostile = json.dumps(data.draw(mutated_doc(har_doc())), default=repr).encode("utf-8", "surrogatepass")
    else:
        hostile = data.draw(mutated_bytes(json.dumps(har_doc()).encode()))
    run("har", ("good.har", json.dumps(har_doc(GOOD_PROMPT)).encode()), ("hostile.har", hostile))


def flow_bytes(prompt: str, mutate: Any = None) -> bytes:
    import io

    from mitmproxy import io as mitm_io
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.url = "https://api.openai.com/v1/chat/completions"
    flow.request.content = CHAT.replace("fuzzed prompt", prompt).encode()
    flow.response.headers["content-type"] = "application/json"
    flow.response.content = ANSWER.encode()
    if mutate:
        mutate(flow)
    out = io.BytesIO()
    mitm_io.FlowWriter(out).add(flow)
    return out.getvalue()


FLOW_FIELDS = {
    "timestamp_start": st.sampled_from([1e300, -1e18, float("inf"), float("nan"), 0.0, -1.0]),
    "timestamp_end": st.sampled_from([1e300, -1e18, float("inf"), float("nan"), 0.0]),
    "header": st.binary(min_size=1, max_size=12),
    "host": st.sampled_from(["[::1", "api.openai.com\x00", "", "xn--", "a" * 300]),
    "status": st.integers(0, 1000),
    "body": st.binary(max_size=60),
}


@FUZZ
@given(st.data())
def test_mitmproxy_flow_mutations_never_crash_the_import(data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        field = data.draw(st.sampled_from(sorted(FLOW_FIELDS)))
        value = data.draw(FLOW_FIELDS[field])

        def mutate(flow: Any) -> None:
            if field == "timestamp_start":
                flow.request.timestamp_start = value
            elif field == "timestamp_end":
                flow.response.timestamp_end = value
            elif field == "header":
                flow.response.headers.fields = (*flow.response.headers.fields, (b"x-fuzz", value))
            elif field == "host":
                flow.request.data.host = value
            elif field == "status":
                flow.response.status_code = value
            else:
                flow.request.content = value

        hostile = flow_bytes("fuzzed prompt", mutate)
    else:
        hostile = data.draw(mutated_bytes(flow_bytes("fuzzed prompt")))
    run("mitmproxy", ("good.mitm", flow_bytes(GOOD_PROMPT)), ("hostile.mitm", hostile))


def test_the_ignore_rules_exist_before_the_first_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """A kill -9 mid-import leaves a `.tmp-*` file: the folder's `.gitignore` must already cover it."""
    writes: list[tuple[str, bool]] = []
    real = files.write_bytes_atomically

    def watched(path: Path, data: bytes, mode: int = 0o666) -> None:
        ignore = path.parent / ".gitignore" if path.parent == root else root / ".gitignore"
        writes.append((path.name, ignore.is_file() and f"{files.TEMP_PREFIX}*" in ignore.read_text()))
        real(path, data, mode)

    root = tmp_path / "rec"
    monkeypatch.setattr(files, "write_bytes_atomically", watched)
    (tmp_path / "c.yaml").write_text(json.dumps(vcr_doc(GOOD_PROMPT)))
    res = CliRunner().invoke(main, ["import", "--from", "vcr", str(tmp_path / "c.yaml"), "--recordings", str(root)])
    assert res.exit_code == 0, res.output
    assert len(writes) >= 2 and all(covered for _, covered in writes), writes


@pytest.mark.slow
@pytest.mark.parametrize("source", ["vcr", "har"])
def test_each_known_hostile_value_in_each_field_a_reader_interprets(source: str) -> None:
    """The sweep the fuzz samples from, made whole: every known hostile value in every field readers read."""
    import yaml

    doc, good = (vcr_doc(), vcr_doc(GOOD_PROMPT)) if source == "vcr" else (har_doc(), har_doc(GOOD_PROMPT))
    dump = ((lambda d: yaml.dump(d, allow_unicode=True).encode("utf-8", "surrogatepass")) if source == "vcr"
            else (lambda d: json.dumps(d, default=repr).encode()))
    name = "c.yaml" if source == "vcr" else "c.har"
    for place in (p for p in leaves(doc) if p and p[-1] in HOT):
        for value in KNOWN:
            run(source, (f"good-{name}", dump(good)), (name, dump(replaced(doc, place, value))))
