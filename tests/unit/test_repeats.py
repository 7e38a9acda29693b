"""semula_repeats=sequence: the n-th identical request of a run gets the n-th answer (cascade, files, sync)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cascade import EXACT, NORMALISED, REQUEST, SETTINGS, FakeLookups

from entries import chat, new_entry
from semula.core.cascade import cascade, run_now
from semula.core.modes import Mode
from semula.core.repeats import Repeats, base_of, occurrence_of, sequenced
from semula.recordings.entry import Answer, recording_of
from semula.recordings.folder import RecordingsFolder
from semula.recordings.format import dumps, loads
from semula.recordings.folder import recording_from_entry
from semula.store.duckdb.store import DuckDBStore


def counter() -> Repeats:
    seen: dict[str, int] = {}

    def count(fp: str) -> int:
        seen[fp] = seen.get(fp, 0) + 1
        return seen[fp]

    return Repeats(count)


def test_keys_of_a_sequence() -> None:
    assert sequenced("fp2:a", 1) == "fp2:a" and sequenced("fp2:a", 3) == "fp2:a#3"
    assert occurrence_of("fp2:a#3") == 3 and occurrence_of("fp2:a") == 1 and base_of("fp2:a#3") == "fp2:a"


def test_auto_records_each_repeat_under_its_own_key_and_never_waits_for_one_in_flight() -> None:
    lookups = FakeLookups(exact={EXACT: 1}, in_flight=True)
    repeats = counter()
    first = run_now(cascade(Mode.AUTO, "p", REQUEST, SETTINGS, lookups, repeats=repeats))
    assert first.decision.action == "serve" and first.occurrence == 1
    lookups.calls.clear()
    second = run_now(cascade(Mode.AUTO, "p", REQUEST, SETTINGS, lookups, repeats=repeats))
    assert (second.decision.action, second.decision.record) == ("forward", True)
    assert (second.request_fp, second.normalised_fp) == (f"{EXACT}#2", f"{NORMALISED}#2")
    assert "in_flight" not in lookups.calls and not any(c.startswith("near") for c in lookups.calls)


@pytest.mark.parametrize(("refuse", "fourth"), [(False, ("serve", 3)), (True, ("refuse", None))])
def test_replay_serves_in_order_then_the_last_or_refuses(refuse: bool, fourth: tuple) -> None:
    lookups = FakeLookups(exact={EXACT: 1, f"{EXACT}#2": 2, f"{EXACT}#3": 3})
    repeats = Repeats(counter().count, refuse_exhausted=refuse)
    served = [run_now(cascade(Mode.REPLAY, "p", REQUEST, SETTINGS, lookups, repeats=repeats)) for _ in range(4)]
    assert [o.decision.entry_id for o in served[:3]] == [1, 2, 3]
    assert (served[3].decision.action, served[3].decision.entry_id) == fourth
    assert (served[3].exhausted is not None) is refuse
    if refuse:
        assert "occurrence 4" in served[3].decision.reason and "3 answer(s)" in served[3].exhausted


def test_one_answer_recordings_replay_for_every_repeat() -> None:
    lookups = FakeLookups(exact={EXACT: 1})
    repeats = counter()
    outcomes = [run_now(cascade(Mode.REPLAY, "p", REQUEST, SETTINGS, lookups, repeats=repeats)) for _ in range(3)]
    assert [o.decision.entry_id for o in outcomes] == [1, 1, 1]


def test_the_nth_answer_is_its_own_file_beside_the_first(tmp_path: Path) -> None:
    store = DuckDBStore.open(tmp_path / "data")
    request = chat("Roll a die")
    first = new_entry(request, body=b'{"n": 1}')
    second = recording_of("p", request, SETTINGS, Answer(host="api.openai.com", body=b'{"n": 2}'), occurrence=2)
    assert second.request_fp == f"{first.request_fp}#2" and second.normalised_fp == f"{first.normalised_fp}#2"
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    paths = [folder.write(store.get_entry(store.upsert_entry(e))) for e in (first, second)]
    assert paths[1].name == paths[0].name.replace(".json", "-2.json")
    assert json.loads(paths[1].read_text())["occurrence"] == 2 and "occurrence" not in json.loads(paths[0].read_text())
    assert loads(dumps(recording_from_entry(store.get_entry(2)))).occurrence == 2
    store.close()

    clone = DuckDBStore.open(tmp_path / "ci")
    report = RecordingsFolder(tmp_path / "rec", tmp_path / "ci").sync(clone, lambda p: SETTINGS)
    assert report.loaded == 2
    fps = sorted(fp for _, _, fp, _ in clone.index_rows())
    assert fps == sorted([first.request_fp, second.request_fp])
    clone.close()


def test_a_bad_occurrence_is_a_bad_file(tmp_path: Path) -> None:
    store = DuckDBStore.open(tmp_path / "data")
    entry = store.get_entry(store.upsert_entry(new_entry(chat("x"))))
    data = json.loads(dumps(recording_from_entry(entry)))
    data["occurrence"] = 0
    with pytest.raises(ValueError, match="occurrence"):
        loads(json.dumps(data))
    store.close()
