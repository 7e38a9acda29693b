"""Hypothesis fuzz of recording files: any mutation of a valid file either loads and replays byte-exact, or
is named bad by both `semula recordings check` and the loader; the other files keep loading either way."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entries import chat
from semula.core.settings import ProjectSettings
from semula.recordings.folder import RecordingsFolder, check
from semula.recordings.format import Recording, body_from, dumps
from semula.store.duckdb.store import DuckDBStore

SSE = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'


def valid(prompt: str, streamed: bool = False) -> dict[str, Any]:
    body = SSE.encode() if streamed else json.dumps({"choices": [{"message": {"content": f"answer {prompt}"}}]}).encode()
    return json.loads(dumps(Recording(
        project="default", provider="openai", host="api.openai.com", method="POST", endpoint="/v1/chat/completions",
        model="gpt-4o", request=chat(prompt).to_json(), status=200,
        headers=[("content-type", "text/event-stream" if streamed else "application/json")], body=body,
        streamed=streamed, prompt_tokens=3, completion_tokens=2, upstream_ms=12.5, recorded_at="2026-12-01T00:00:00")))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=12)
    | st.sampled_from(["x\r\nset-cookie: a=1", "../../etc", "\x00", "bad name: v", "content-length: 1"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += paths(child, (*prefix, i))
    return out


def mutate(data: dict[str, Any], path: tuple[Any, ...], action: str, value: Any) -> None:
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = value
    elif isinstance(parent, dict):  # "add" beside it
        parent[f"{last}_extra"] = value
    else:
        parent.append(value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), streamed=st.booleans(), action=st.sampled_from(["delete", "replace", "add"]),
       value=json_values)
def test_a_mutated_file_loads_byte_exact_or_is_named_bad_by_both(tmp_path_factory: Any, data: Any, streamed: bool,
                                                                 action: str, value: Any) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    folder = root / "rec"
    good, target = valid("the good one"), valid("the mutated one", streamed)
    path = data.draw(st.sampled_from(paths(target)))
    mutated = copy.deepcopy(target)
    mutate(mutated, path, action, value)
    endpoint = folder / "default" / "openai" / "v1-chat-completions"
    endpoint.mkdir(parents=True)
    (endpoint / "a-good.json").write_text(json.dumps(good, indent=2))
    (endpoint / "b-mutated.json").write_text(json.dumps(mutated, indent=2, allow_nan=True))
    _, bad = check(folder)
    checked_bad = {rel for rel, _ in bad}
    store = DuckDBStore.open(root / "data")
    try:
        report = RecordingsFolder(folder, root / "data").sync(store, lambda p: ProjectSettings())
        loaded_bad = {rel for rel, _ in report.bad}
        assert checked_bad == loaded_bad, (bad, report.bad)
        entries = [store.get_entry(i) for i, *_ in store.index_rows()]
        bodies = {e.last_text: e for e in entries if e is not None}
        assert "the good one" in bodies, "a bad file took a good one down"
        assert report.loaded == 2 - len(loaded_bad)
        if not loaded_bad:
            entry = next(e for e in entries if e is not None and e.last_text != "the good one")
            assert entry.body == body_from(mutated["response"])  # replayed byte-exact
            for name, value in entry.headers:
                assert "\r" not in value and "\n" not in value and " " not in name
            assert 100 <= entry.status <= 599
    finally:
        store.close()


def test_the_fuzz_sees_the_good_file_alone(tmp_path: Path) -> None:
    folder = tmp_path / "rec" / "default" / "openai" / "v1-chat-completions"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps(valid("alone"), indent=2))
    assert check(tmp_path / "rec") == (1, [])
