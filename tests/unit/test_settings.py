from __future__ import annotations

import pytest

from semula.core.settings import ProjectSettings, SettingsError, parse_setting, settings_from_mapping, validate_project


@pytest.mark.parametrize(
    "key, raw, expected",
    [
        ("bypass_temperature", "0.5", 0.5),
        ("bypass_tools", "on", True),
        ("bypass_tools", "false", False),
        ("ignore_params", '["seed", "n"]', ("seed", "n")),
        ("ignore_params", "seed,n", ("seed", "n")),
        ("scrub_patterns", '["run-\\\\d+"]', ("run-\\d+",)),
        ("lexical_serve_threshold", "0.9", 0.9),
        ("tail_n", "3", 3),
        ("tail_n", "all", None),
        ("embedding_serve_threshold", "off", None),
    ],
)
def test_parse_valid(key, raw, expected):
    assert parse_setting(key, raw) == expected


@pytest.mark.parametrize(
    "key, raw, message",
    [
        ("lexical_serve_thresold", "0.9", "valid settings: scrub_patterns"),
        ("lexical_serve_threshold", "1.5", "between 0 and 1"),
        ("scrub_patterns", '["("]', "invalid regular expression"),
        ("bypass_tools", "maybe", "true or false"),
        ("tail_n", "0", "positive"),
        ("bypass_temperature", "warm", "invalid value"),
    ],
)
def test_parse_invalid(key, raw, message):
    with pytest.raises(SettingsError, match=message):
        parse_setting(key, raw)


def test_settings_from_mapping_overrides_defaults():
    s = settings_from_mapping({"ignore_params": ["seed"]})
    assert s.ignore_params == ("seed",) and s.bypass_temperature == ProjectSettings().bypass_temperature


@pytest.mark.parametrize("name", ["default", "team-a", "a.b_c", "X1"])
def test_valid_projects(name):
    assert validate_project(name) == name


@pytest.mark.parametrize("name", ["", "../etc", "a b", "x'; DROP TABLE entries; --", "a/b", "-lead", "é" * 3, "x" * 65])
def test_invalid_projects(name):
    with pytest.raises(SettingsError, match="invalid project name"):
        validate_project(name)
