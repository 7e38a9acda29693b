"""What the adapters declare about their providers, and the one table of it that core receives as data.

Parameter rules (`Adapter.param_rules`), the key drift sends (`Adapter.auth`) and the answer formats
redacted inside (`Adapter.redact_answer`) live in the adapters; `semula.providers` builds one frozen
table per concern from the static registry, and the package binds the parameter table into core once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from semula.core.redact import redact_bytes
from semula.core.request import params
from semula.core.request.params import NO_PARAM_RULES, EndpointDefaults, ParamRules, canonical_params
from semula.core.settings import ProjectSettings
from semula.providers import (
    ADAPTERS,
    GENERIC,
    PARAM_RULES,
    PROVIDER_NAMES,
    KeyAuth,
    NotResendable,
    auth_for,
    first_host,
    redacted_answer,
)
from semula.providers.anthropic import ANTHROPIC_PARAMS
from semula.providers.base import RawRequest
from semula.providers.eventstream import Header, Message, encode, parse_stream
from semula.providers.gemini import GEMINI_PARAMS
from semula.providers.openai import OPENAI_PARAMS
from semula.recordings.entry import Answer, recording_of

ADDON = Path(__file__).resolve().parents[2] / "addon"


def test_the_table_holds_every_registered_name_and_is_frozen() -> None:
    assert set(PARAM_RULES) == PROVIDER_NAMES
    with pytest.raises(TypeError):
        PARAM_RULES["mistral"] = OPENAI_PARAMS  # type: ignore[index]


@pytest.mark.parametrize(("provider", "rules"), [
    ("openai", OPENAI_PARAMS), ("azure", OPENAI_PARAMS),
    ("anthropic", ANTHROPIC_PARAMS), ("vertex-anthropic", ANTHROPIC_PARAMS),
    ("gemini", GEMINI_PARAMS), ("vertex-gemini", GEMINI_PARAMS),
    # OpenAI's format on another's host: the host's defaults are its own, not stated, so every parameter counts
    ("mistral", NO_PARAM_RULES), ("gemini-openai", NO_PARAM_RULES), ("anthropic-openai", NO_PARAM_RULES),
    ("bedrock", NO_PARAM_RULES), ("generic", NO_PARAM_RULES),
])
def test_each_provider_has_its_adapters_rules(provider: str, rules: ParamRules) -> None:
    assert PARAM_RULES[provider] is rules
    assert params.param_rules(provider) is rules  # the table core was given


def test_core_receives_the_registrys_table_whatever_is_imported_first() -> None:
    """A process that imports only core still normalises with the providers' rules (bound by the package)."""
    code = ("from semula.core.request.params import canonical_params as c; import json, sys; "
            "print(json.dumps([c('openai', '/v1/chat/completions', {'temperature': 1.0, 'n': 2}), "
            "c('vertex-gemini', '/x', {'generation_config': {'candidate_count': 1}}), "
            "'semula.providers.openai' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ADDON), "PATH": ""})
    assert json.loads(out.stdout) == [{"n": 2}, {}, True]


def test_a_second_different_table_is_refused() -> None:
    params.bind_param_rules(PARAM_RULES)  # the same table again: harmless
    with pytest.raises(RuntimeError, match="already bound"):
        params.bind_param_rules({**PARAM_RULES, "openai": NO_PARAM_RULES})
    assert params.param_rules("openai") is OPENAI_PARAMS


def test_rules_a_new_provider_would_declare() -> None:
    """What a native adapter's rules mean, shown on a table of its own (the bound one is the registry's)."""
    chat = EndpointDefaults(("/v1/chat/completions",), {"temperature": 0.7, "safe_prompt": False})
    rules = ParamRules(defaults=(chat,), tool_choice_defaults=("auto",))
    assert rules.defaults_for("/v1/chat/completions") == {"temperature": 0.7, "safe_prompt": False}
    assert rules.defaults_for("/v1/embeddings") is None
    assert rules.default_tool_choice("auto", tools=True) and not rules.default_tool_choice("any", tools=True)
    assert not rules.default_tool_choice("none", tools=False)
    unregistered = canonical_params("some-unregistered-name", "/v1/chat/completions", {"temperature": 1.0})
    assert unregistered == {"temperature": 1}


def test_the_sampling_objects_are_the_adapters() -> None:
    assert params.sampling_objects() == ("generationConfig", "generation_config")


# ---------------------------------------------------------------- auth


@pytest.mark.parametrize(("provider", "auth"), [
    ("openai", KeyAuth(("OPENAI_API_KEY",))),
    ("anthropic", KeyAuth(("ANTHROPIC_API_KEY",), "x-api-key", "{}")),
    ("anthropic-openai", KeyAuth(("ANTHROPIC_API_KEY",))),
    ("gemini", KeyAuth(("GEMINI_API_KEY", "GOOGLE_API_KEY"), "x-goog-api-key", "{}")),
    ("gemini-openai", KeyAuth(("GEMINI_API_KEY", "GOOGLE_API_KEY"))),
    ("azure", KeyAuth(("AZURE_OPENAI_API_KEY",), "api-key", "{}")),
    ("mistral", KeyAuth(("MISTRAL_API_KEY",))),
    ("bedrock", NotResendable("AWS-signed")),
    ("vertex-gemini", NotResendable("Google-OAuth")),
    ("vertex-anthropic", NotResendable("Google-OAuth")),
    ("google-oauth", NotResendable("an OAuth exchange")),
    ("generic", NotResendable("not a provider call")),
    ("mcp", KeyAuth(("SEMULA_MCP_TOKEN",))),
    ("not-registered", KeyAuth(("NOT_REGISTERED_API_KEY",))),
])
def test_auth_is_what_the_adapter_declares(provider: str, auth: object) -> None:
    assert auth_for(provider) == auth


def test_adapters_sharing_a_name_declare_the_same() -> None:
    for name in PROVIDER_NAMES:
        same = [a for a in (*ADAPTERS, GENERIC) if a.name == name]
        assert len({repr(a.param_rules) for a in same}) == 1 and len({a.auth() for a in same}) == 1, name


# ---------------------------------------------------------------- hosts and answers


def test_eval_hosts_come_from_the_registry() -> None:
    assert [first_host(p) for p in ("openai", "anthropic", "gemini", "mistral", "azure", "nope")] == [
        "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com", "api.mistral.ai", None, None]


def _event(text: str) -> bytes:
    return encode(Message((Header(":event-type", "string", "contentBlockDelta"),
                           Header(":message-type", "string", "event")),
                          json.dumps({"delta": {"text": text}}).encode()))


def test_an_event_stream_answer_is_redacted_inside_whatever_the_recordings_provider() -> None:
    """Bedrock's format through a host the user added is recorded as generic: still redacted frame by frame."""
    body = _event("key sk-" + "a" * 30) + _event("done")
    request = GENERIC.unparsed(RawRequest("POST", "gw.example", "/invoke", (), {}, b'{"x": 1}'), {"x": 1})
    entry = recording_of("p", request, ProjectSettings(), Answer(host="gw.example", body=body, streamed=True))
    messages = parse_stream(entry.body)  # lengths and CRCs recomputed
    assert b"sk-aaaa" not in entry.body and b"[REDACTED]" in messages[0].payload and len(messages) == 2


def test_other_answers_are_redacted_as_bytes() -> None:
    body = b'{"text": "sk-' + b"b" * 30 + b'"}'
    assert redacted_answer(body, redact_bytes) == redact_bytes(body) != body
