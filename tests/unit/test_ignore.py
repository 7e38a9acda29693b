"""core/request/ignore.py and its use by the fingerprints: fields the user declares volatile (semula_ignore).

A declared path or pattern leaves both fingerprints; nothing else does: a sibling key, a prefix, the
value's presence, the model and the rest of the prompt still count. Bad rules are one clear error.
"""

from __future__ import annotations

import json

import pytest
from entries import chat, fingerprints, new_entry

from semula.core.explain import ignore_note, miss_message, nearest_recordings
from semula.core.nearmatch import near_match, review_score
from semula.core.request.canonical import CanonicalRequest, Message, ignored, normalised_fingerprint, request_fingerprint
from semula.core.request.ignore import (IGNORED, MAX_PATTERN_CHARS, MAX_PATTERNS, NO_IGNORE, IgnoreError,
                                        IgnoreRules, parse_ignore)
from semula.core.settings import (FINGERPRINT_KEYS, ProjectSettings, SettingsError, parse_setting,
                                  settings_from_mapping, settings_to_json)
from semula.engine.engine import Engine
from semula.store.duckdb.store import DuckDBStore

RULES = IgnoreRules(("run_tag.id", "metadata.run_id", "trace[*].span"), (r"seed=\d+",))


def ask(text: str, **params) -> CanonicalRequest:
    return chat(text, **params)


def same(a: CanonicalRequest, b: CanonicalRequest, rules: IgnoreRules = RULES) -> tuple[bool, bool]:
    """(exact fingerprints equal, normalised fingerprints equal) under `rules`."""
    fa, fb = fingerprints(a, ignore=rules), fingerprints(b, ignore=rules)
    return fa[0] == fb[0], fa[1] == fb[1]


BASE = "Pick a colour at random, seed=123"


@pytest.mark.parametrize(("recorded", "incoming", "expected"), [
    # what the user named: both fingerprints agree
    (ask(BASE, run_tag={"id": "A"}), ask("Pick a colour at random, seed=456", run_tag={"id": "B"}), (True, True)),
    (ask(BASE, trace=[{"span": 1}, {"span": 2}]), ask(BASE, trace=[{"span": 7}, {"span": 8}]), (True, True)),
    (ask(BASE, metadata={"run_id": "A"}), ask(BASE, metadata={"run_id": "B"}), (True, True)),  # never counted anyway
    # what the user did not name still counts
    (ask(BASE, run_tag={"id": "A", "env": "ci"}), ask(BASE, run_tag={"id": "A", "env": "dev"}), (False, False)),
    (ask(BASE, run_tag={"id": "A"}), ask(BASE), (False, False)),  # present vs absent: the placeholder is there
    (ask(BASE, run_tag={"ids": "A"}), ask(BASE, run_tag={"ids": "B"}), (False, False)),  # a longer key: not a prefix
    (ask(BASE, run_tag_id="A"), ask(BASE, run_tag_id="B"), (False, False)),
    (ask(BASE, trace=[{"span": 1, "name": "a"}]), ask(BASE, trace=[{"span": 1, "name": "b"}]), (False, False)),
    (ask(BASE, trace={"span": 1}), ask(BASE, trace={"span": 2}), (False, False)),  # [*] needs a list
    (ask(BASE), ask("Pick a colour at random, seed=456 please"), (False, False)),
    (ask(BASE), ask("Pick an animal at random, seed=456"), (False, False)),
    (ask(BASE), ask("Pick a colour at random, seed=abc"), (False, False)),  # the pattern does not match
    (ask(BASE), ask(BASE, temperature=0.9), (False, False)),
    (ask(BASE, run_tag={"id": "A"}), ask(BASE, run_tag={"id": "B"}, model="gpt-4.1"), (False, False)),
])
def test_only_the_named_fields_leave_the_fingerprints(recorded, incoming, expected):
    assert same(recorded, incoming) == expected


def test_no_rules_change_no_fingerprint():
    request = ask(BASE, run_tag={"id": "A"})
    assert request_fingerprint(request) == request_fingerprint(request, NO_IGNORE)
    assert normalised_fingerprint(request) == normalised_fingerprint(request, ignore=NO_IGNORE)
    assert ignored(request, NO_IGNORE) is request
    # rules that find nothing in a request leave its fingerprints as they were
    other = IgnoreRules(("nowhere.id",), (r"never-here-\d+",))
    assert fingerprints(request, ignore=other) == fingerprints(request)


def test_the_stored_request_and_the_model_keep_their_values():
    request = ask(BASE, run_tag={"id": "A"})
    taken: set[str] = set()
    seen = ignored(request, RULES, taken)
    assert seen.body["run_tag"] == {"id": IGNORED} and request.body["run_tag"] == {"id": "A"}
    assert seen.messages[0].text == f"Pick a colour at random, {IGNORED}" and request.messages[0].text == BASE
    assert taken == {"run_tag.id", r"/seed=\d+/"}
    model_like = ignored(ask("hi", model="gpt-4o-seed=1"), IgnoreRules((), (r"seed=\d+",)))
    assert model_like.model == "gpt-4o-seed=1" and model_like.body["model"] == "gpt-4o-seed=1"


def test_a_path_into_what_the_adapter_read_as_the_prompt_is_not_applied():
    """A body key the adapter consumed (not a parameter) is never reached, whatever its name."""
    request = ask(BASE)
    body = {**request.body, "odd": {"id": "A"}}
    consumed = CanonicalRequest(**{**request.__dict__, "body": body})  # `odd` is in the body, not in params
    taken: set[str] = set()
    assert ignored(consumed, IgnoreRules(("odd.id",)), taken).body["odd"] == {"id": "A"} and not taken


def test_patterns_inside_several_text_parts_keep_the_parts_apart():
    def parts(first: str, second: str) -> CanonicalRequest:
        return ask([{"type": "text", "text": first}, {"type": "text", "text": second}])

    rules = IgnoreRules((), (r"seed=\d+",))
    assert same(parts("roll seed=1", "twice"), parts("roll seed=22222", "twice"), rules) == (True, True)
    # a word moved across the boundary still differs (the layout still splits the texts)
    assert same(parts("roll seed=1", "twice"), parts("roll", "seed=1 twice"), rules) == (False, False)
    assert ignored(parts("roll seed=1", "twice"), rules).messages[0].layout == (len(f"roll {IGNORED}"), 5)


def test_a_hand_edited_layout_is_ignored_whole():
    message = Message("user", "a seed=1\nb", layout=(3, 3))  # lengths that do not add up
    request = CanonicalRequest(**{**ask("x").__dict__, "messages": (message,)})
    assert ignored(request, IgnoreRules((), (r"seed=\d+",))).messages[0] == Message(
        "user", f"a {IGNORED}\nb", layout=(3, 3))


@pytest.mark.parametrize(("value", "expected"), [
    (None, NO_IGNORE),
    ({}, NO_IGNORE),
    ('{"paths": ["metadata.run_id"]}', IgnoreRules(("metadata.run_id",))),
    ({"patterns": [r"seed=\d+", r"seed=\d+"]}, IgnoreRules((), (r"seed=\d+",))),  # duplicates once
    ({"paths": ["a.b[*].c-d", "x"], "patterns": [r"\d{4}-\d{2}-\d{2}T\S+"]},
     IgnoreRules(("a.b[*].c-d", "x"), (r"\d{4}-\d{2}-\d{2}T\S+",))),
])
def test_the_setting_parses(value, expected):
    assert parse_setting("ignore", value) == expected


@pytest.mark.parametrize(("value", "message"), [
    ('{"paths": ["model"]}', "reaches into the model, the prompt or the tools"),
    ('{"paths": ["messages[*].content"]}', "'messages'"),
    ('{"paths": ["contents[*].parts"]}', "'contents'"),
    ('{"paths": ["system"]}', "'system'"),
    ('{"paths": ["tools[*].description"]}', "'tools'"),
    ('{"paths": ["stream"]}', "'stream'"),
    ('{"paths": ["a..b"]}', "is not keys joined by '.'"),
    ('{"paths": ["a.*"]}', "is not keys joined by '.'"),
    ('{"paths": ["$..id"]}', "is not keys joined by '.'"),
    ('{"paths": ["a[0]"]}', "is not keys joined by '.'"),
    ('{"paths": ["' + ".".join(["k"] * 17) + '"]}', "deeper than 16"),
    ('{"paths": "metadata.run_id"}', "paths must be a list of strings"),
    ('{"pattern": ["x"]}', "unknown key"),
    ('["metadata.run_id"]', "must be an object"),
    ('metadata.run_id', "is not JSON"),
    ('{"patterns": ["seed=\\d+"]}', "a backslash in a pattern as"),
    ('{"patterns": ["(a)\\\\1"]}', "not a valid RE2 regular expression"),
    ('{"patterns": ["(?<=x)y"]}', "not a valid RE2 regular expression"),
    ('{"patterns": ["("]}', "not a valid RE2 regular expression"),
    ('{"patterns": ["x*"]}', "matches the empty text"),
    ('{"patterns": [".+"]}', "replaces most of an ordinary prompt"),
    ('{"patterns": ["[\\\\s\\\\S]+"]}', "replaces most of an ordinary prompt"),
    ('{"patterns": ["\\\\w+"]}', "replaces most of an ordinary prompt"),
    ('{"patterns": ["[a-z]+"]}', "replaces most of an ordinary prompt"),
    ('{"patterns": ["\\\\d+"]}', "matches a plain number (3)"),
    ('{"patterns": ["[0-9.]+"]}', "matches a plain number (3)"),
    ('{"patterns": ["\\\\d{4}"]}', "matches a plain number (2024)"),
    ('{"patterns": ["a{1000}{1000}"]}', "not a valid RE2 regular expression"),  # over RE2's program size
])
def test_bad_rules_are_one_clear_error(value, message):
    with pytest.raises(SettingsError, match="semula_ignore") as error:
        parse_setting("ignore", value)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_setting_has_caps():
    with pytest.raises(IgnoreError, match=f"at most {MAX_PATTERNS} patterns"):
        parse_ignore({"patterns": [f"seed{i}=\\d+" for i in range(MAX_PATTERNS + 1)]})
    with pytest.raises(IgnoreError, match=f"at most {MAX_PATTERN_CHARS} characters"):
        parse_ignore({"patterns": ["x" * (MAX_PATTERN_CHARS + 1)]})
    with pytest.raises(IgnoreError, match="at most 32 paths"):
        parse_ignore({"paths": [f"k{i}" for i in range(10_000)]})


def test_a_pathological_pattern_runs_in_linear_time_on_a_long_prompt():
    """RE2 has no backtracking: the classic (a+)+$ against 'aaaa…b' finishes (Python's re would not)."""
    rules = parse_ignore({"patterns": ["(a+)+$", "(x|x)*y"]})
    text = "a" * 200_000 + "b" + "x" * 100_000
    assert ignored(ask(text), rules).messages[0].text == text  # neither matches: nothing replaced


def test_the_setting_round_trips_and_feeds_both_fingerprints():
    settings = settings_from_mapping({"ignore": json.dumps(RULES.to_json())})
    assert settings.ignore == RULES and "ignore" in FINGERPRINT_KEYS
    assert settings.fingerprint_inputs[-1] == RULES
    assert settings_from_mapping(settings_to_json(settings)) == settings
    assert settings_to_json(ProjectSettings())["ignore"] == {"paths": [], "patterns": []}


def test_the_miss_explanation_names_what_was_ignored_and_only_what_still_differs():
    recorded = ask(BASE, run_tag={"id": "A"})
    incoming = ask("Pick a colour at random, seed=456", run_tag={"id": "B"}, temperature=0.7)
    settings = ProjectSettings(ignore=RULES)
    [nearest] = nearest_recordings(incoming, [(1, recorded)], settings=settings)
    said = "; ".join(nearest.differences)
    assert "temperature" in said and "seed" not in said and "run_tag" not in said, said
    note = ignore_note(incoming, RULES)
    assert note == r"ignored by semula_ignore: run_tag.id, /seed=\d+/ (not found in this request: " \
                   "trace[*].span) (metadata.run_id: never counted anyway)"
    message = miss_message("p", "replay", [nearest], [], ignore=note)
    assert r"Ignored by semula_ignore: run_tag.id, /seed=\d+/" in message and "every other field counts" in message
    assert ignore_note(incoming, NO_IGNORE) is None


def test_changing_the_setting_refingerprints_existing_recordings(tmp_path):
    """Recordings made before the setting (fingerprints without it) match once it is set, and stop
    matching once it is removed: both fingerprints are recomputed from the stored requests."""
    engine = Engine.open(DuckDBStore.open(tmp_path))
    try:
        entry = engine.record(new_entry(ask(BASE, run_tag={"id": "A"})))
        incoming = ask("Pick a colour at random, seed=456", run_tag={"id": "B"})
        again = ask(BASE, run_tag={"id": "A"})

        def match(request):
            return engine.match("p", *fingerprints(request, ignore=engine.settings_for("p").ignore))

        assert match(incoming) is None
        result = engine.recordings.config_set("p", "ignore", json.dumps(RULES.to_json()))
        assert result["refingerprinted"] == 1 and result["value"]["paths"] == list(RULES.paths)
        found = match(incoming)
        assert found is not None and (found.tier, found.entry_id) == ("exact", entry)
        assert match(again).tier == "exact"
        reopened = Engine.open(engine.store)  # the new fingerprints are stored, not only indexed
        assert reopened.match("p", *fingerprints(incoming, ignore=RULES)).entry_id == entry
        engine.recordings.config_set("p", "ignore", "null")
        assert match(incoming) is None and match(again).tier == "exact"
    finally:
        engine.close()


def test_the_near_tiers_see_the_same_placeholders():
    stored = ask("Please list three quiet hotels near the old harbour, seed=1", run_tag={"id": "A"})
    incoming = ask("Please list three calm hotels near the old harbour, seed=2", run_tag={"id": "B"})
    plain = near_match(incoming, stored, ProjectSettings())
    assert "run_tag" in (plain.reason or ""), plain
    verdict = near_match(incoming, stored, ProjectSettings(ignore=RULES))
    assert verdict.review and "run_tag" not in (verdict.reason or "") and "seed" not in (verdict.guard_reason or "")
    assert not verdict.serve and verdict.score < 1, verdict  # the reworded prompt still counts
    assert review_score(incoming, stored, ProjectSettings(ignore=RULES)) is not None


def test_a_bad_rule_in_a_settings_file_is_named_and_skipped(tmp_path):
    """A hand-edited `_settings.json` is untrusted input: named by the check and the loader, never a crash."""
    from semula.recordings.folder import check
    from semula.recordings.shared import folder_settings, settings_file

    rel, text = settings_file("p", {"ignore": {"paths": ["model"]}, "bypass_tools": True})
    (tmp_path / "p").mkdir()
    (tmp_path / rel).write_text(text, encoding="utf-8")
    good, bad = check(tmp_path)
    assert good == 0 and bad == [("p/_settings.json", bad[0][1])] and "reaches into the model" in bad[0][1]
    assert folder_settings(tmp_path) == {}
    rel, text = settings_file("p", {"ignore": RULES.to_json()})
    (tmp_path / rel).write_text(text, encoding="utf-8")
    assert folder_settings(tmp_path)["p"].ignore == RULES


SCOPED = "p.t-test-one-1a2b3c4d"  # pytest --semula-scope=test: a project of its own, with p's settings


def test_a_test_scoped_project_is_keyed_by_its_base_projects_rule(tmp_path):
    """Set on the base project, the rule re-keys its test-scoped projects' recordings too, and a fresh clone
    of the folder fingerprints them under it (a scoped project without settings has its base's)."""
    from semula.recordings.folder import RecordingsFolder

    root, data = tmp_path / "rec", tmp_path / "data"
    engine = Engine.open(DuckDBStore.open(data), folder=RecordingsFolder(root, data))
    try:
        entry = engine.record(new_entry(ask(BASE, run_tag={"id": "A"}), SCOPED))
        incoming = ask("Pick a colour at random, seed=9", run_tag={"id": "B"})
        assert engine.match(SCOPED, *fingerprints(incoming, ignore=RULES)) is None
        result = engine.recordings.config_set("p", "ignore", RULES.to_json())
        assert result["refingerprinted"] == 1 and engine.settings_for(SCOPED).ignore == RULES
        assert engine.match(SCOPED, *fingerprints(incoming, ignore=RULES)).entry_id == entry
    finally:
        engine.close()
    clone = tmp_path / "clone"
    engine = Engine.open(DuckDBStore.open(clone), folder=RecordingsFolder(root, clone))
    try:
        assert engine.match(SCOPED, *fingerprints(incoming, ignore=RULES)).tier == "exact"
    finally:
        engine.close()
