"""One spelling of "off": `off` turns off every switch, the recordings folder, an optional project setting and
SEMULA_STORE_LISTEN; the older spellings users may have in configs and CI variables still read as off."""

from __future__ import annotations

import pytest

from semula.core.settings import OFF, SWITCH_OFF, parse_setting, parse_switch
from semula.recordings.location import recordings_location
from semula.store.selection import LISTEN_ENV, listen_enabled

SYNONYMS = sorted(SWITCH_OFF - {"", OFF})


@pytest.mark.parametrize("spelling", [OFF, OFF.upper(), *SYNONYMS])
def test_every_place_reads_off_and_its_synonyms_as_off(spelling: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_switch("SEMULA_EMBEDDINGS", spelling) is False
    assert recordings_location(spelling) is None
    assert parse_setting("bypass_tools", spelling) is False
    monkeypatch.setenv(LISTEN_ENV, spelling)
    assert listen_enabled() is False


@pytest.mark.parametrize("key", ["max_age", "tail_n", "embedding_serve_threshold"])
def test_off_unsets_an_optional_setting(key: str) -> None:
    assert parse_setting(key, OFF) is None and parse_setting(key, "none") is None


def test_an_unset_or_empty_listen_variable_keeps_listening(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LISTEN_ENV, raising=False)
    assert listen_enabled()
    monkeypatch.setenv(LISTEN_ENV, "")
    assert listen_enabled()
    monkeypatch.setenv(LISTEN_ENV, "poll")
    assert not listen_enabled()


def test_the_help_documents_off_only() -> None:
    from semula.proxy.run.options import declared

    helps = " ".join(option.help for option in declared())
    assert "'off'" in helps
    for synonym in ("'none'", "'false'", "'disabled'", "'0'"):
        assert synonym not in helps, synonym
