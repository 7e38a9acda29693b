"""Misspelt semula options and variables (session/optioncheck.py), and the placeholder groups (clientenv.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from semula.proxy.run.options import declared
from semula.session.clientenv import (
    PLACEHOLDER_KEY, missing_placeholders, placeholder_keys, shadowed_placeholders,
)
from semula.session.optioncheck import ENVIRONMENT, OptionError, check_environment, check_sets

ADDON = Path(__file__).resolve().parents[2] / "addon" / "semula"
NOT_VARIABLES = {"SEMULA_RESULTS"}  # a line prefix the report's notebooks print, not a variable


@pytest.mark.parametrize("item, message", [
    ("semula_mdoe=replay", "unknown option 'semula_mdoe' in --set: did you mean semula_mode?"),
    ("semula-mode=replay", "unknown option 'semula-mode' in --set: did you mean semula_mode?"),
    ("semla_mode=replay", "unknown option 'semla_mode' in --set: did you mean semula_mode?"),
    ("semula_record_error=true", "did you mean semula_record_errors?"),
    ("semula_mode=bogus", "semula_mode='bogus' is not one of auto, replay, record, passthrough"),
    ("semula_repeats=seq", "semula_repeats='seq' is not one of one, sequence"),
    ("semula_record_errors=yes", 'boolean must be "true", "false"'),
    ("semula_load_timeout=soon", "semula_load_timeout='soon' is not a number over 0"),
    ("semula_max_body_mb=-1", "semula_max_body_mb='-1' is not a number over 0"),
    ("semula_project=a/b", "bad option value in --set"),
])
def test_a_misspelt_name_or_bad_value_names_the_closest_option(item: str, message: str) -> None:
    with pytest.raises(OptionError) as raised:
        check_sets([item])
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_good_options_and_mitmproxys_own_pass() -> None:
    check_sets(["semula_mode=replay", "semula_load_timeout=2.5", "semula_max_body_mb=8", "confdir=/tmp/x",
                "semula_extra_hosts=a.example", "semula_extra_hosts=b.example", "ssl_insecure=true",
                "semula_record_errors=true", "allow_hosts=api\\.example"])


@pytest.mark.parametrize("variable, message", [
    ("SEMULA_MDOE", "unknown environment variable SEMULA_MDOE: did you mean SEMULA_MODE?"),
    ("SEMULA_RECORDNGS", "did you mean SEMULA_RECORDINGS?"),
    ("SEMULA_DATADIR", "did you mean SEMULA_DATA_DIR?"),
    ("semula_mode", "did you mean SEMULA_MODE?"),
    ("SEMULA_RECORD_ERRORS", "SEMULA_RECORD_ERRORS is not read from the environment: set the option with "
                             "--set semula_record_errors=VALUE"),
    ("SEMULA_EXTRA_HOST", "did you mean the option semula_extra_hosts (--set semula_extra_hosts=VALUE)?"),
])
def test_a_variable_a_typo_away_from_a_known_one_is_an_error(variable: str, message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        check_environment({variable: "1"})


@pytest.mark.parametrize("variable", ["SEMULA_PORT", "SEMULA_TOKEN", "SEMULA_STORE_URL", "SEMULA_FOO",
                                      "SEMULA_TESTS", "OTHER_MDOE", *sorted(ENVIRONMENT)])
def test_known_variables_and_the_users_own_pass(variable: str) -> None:
    check_environment({variable: "1"})


def test_every_semula_variable_the_code_reads_is_listed() -> None:
    """The one list stays complete: a variable added to the code without it would be flagged as a typo."""
    sources = [path for path in [*ADDON.rglob("*.py"), *(ADDON.parents[1] / "scripts").rglob("*")]
               if path.name != "optioncheck.py"  # whose docstrings name users' own variables
               and "__pycache__" not in path.parts]  # bytecode a test run compiled (its bytes can spell SEMULA_N)
    found = {name for path in sources if path.is_file()
             for name in re.findall(r"\bSEMULA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace"))}
    assert found - NOT_VARIABLES <= ENVIRONMENT, found - NOT_VARIABLES - ENVIRONMENT
    options = {option.name.upper() for option in declared()}
    assert not {"SEMULA_PROJECT", "SEMULA_MODE"} - options, "the option forms these mirror"


def test_google_gets_one_placeholder_the_one_google_genai_reads_first() -> None:
    keys = placeholder_keys({"HOME": "/nonexistent"})
    assert keys["GOOGLE_API_KEY"] == PLACEHOLDER_KEY and "GEMINI_API_KEY" not in keys
    assert "ANTHROPIC_API_KEY" not in placeholder_keys({"ANTHROPIC_AUTH_TOKEN": "t", "HOME": "/nonexistent"})
    assert "AZURE_OPENAI_API_KEY" not in placeholder_keys({"AZURE_OPENAI_AD_TOKEN": "t", "HOME": "/nonexistent"})


@pytest.mark.parametrize("later, withdrawn", [
    ({"GEMINI_API_KEY": "suite"}, ["GOOGLE_API_KEY"]),
    ({"GOOGLE_API_KEY": "suite"}, []),  # replaced, not doubled
    ({"AWS_ACCESS_KEY_ID": "AKIA-suite"}, ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]),
    ({"AWS_REGION": "eu-west-1"}, ["AWS_DEFAULT_REGION"]),
    ({}, []),
])
def test_a_placeholder_steps_aside_when_the_suite_fills_its_group(later: dict[str, str],
                                                                  withdrawn: list[str]) -> None:
    placed = placeholder_keys({"HOME": "/nonexistent"})
    environ = {**placed, **later}
    assert shadowed_placeholders(placed, environ) == withdrawn
    for name in withdrawn:
        del environ[name]
    assert not missing_placeholders(placed, environ).keys() & set(withdrawn), "the group is not empty"
    for name in later:
        environ.pop(name)
    assert missing_placeholders(placed, environ).keys() >= set(withdrawn), "an empty group gets them back"
