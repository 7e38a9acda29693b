"""Side calls, extra hosts and OpenAI-compatible paths: the registry's tables, the options, the hooks.

The end-to-end runs are tests/e2e/test_e2e_side_calls.py and tests/e2e/test_e2e_extra_hosts.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow, tutils

from semula.session.clientenv import intercepted_hosts

from semula.cli.proxy_cmd import mitmproxy_args
from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.redact import FingerprintKey
from semula.providers import (
    DEFAULT_PROVIDER_HOSTS,
    PROVIDER_NAMES,
    adapter_for,
    host_matches,
    side_call_for,
)
from semula.providers.base import RawRequest
from semula.providers.sidepaths import compile_side_paths
from semula.proxy.addon import SemulaAddon
from addon_harness import run_addon
from semula.proxy.run.options import host_list

KEY = FingerprintKey(b"k" * 32)


# ---------------------------------------------------------------- side calls


@pytest.mark.parametrize(
    ("host", "path", "provider", "status"),
    [
        ("api.openai.com", "/v1/traces/ingest", "openai", 204),
        ("eu.api.openai.com:443", "/v1/traces/ingest", "openai", 204),
        ("api.anthropic.com", "/api/event_logging/batch", "anthropic", 200),
        ("api.anthropic.com", "/api/event_logging/v2/batch", "anthropic", 200),
        ("api.anthropic.com", "/api/claude_code/metrics", "anthropic", 200),
        ("api.openai.com", "/v1/chat/completions", None, None),
        ("api.openai.com", "/v1/traces/ingest/extra", None, None),
        ("api.groq.com", "/v1/traces/ingest", None, None),  # only OpenAI's own host takes traces
        ("api.openai.com.evil.net", "/v1/traces/ingest", None, None),
    ],
)
def test_side_calls_are_declared_by_the_adapters(host: str, path: str, provider: str | None,
                                                  status: int | None) -> None:
    found = side_call_for(host, path)
    assert (found.provider if found else None) == provider
    assert (found.path.status if found else None) == status
    if found:
        assert found.reason.startswith("side call: ") and "never recorded" in found.reason


def test_a_projects_side_paths_extend_the_declared_ones() -> None:
    mine = compile_side_paths([r"^/telemetry/"])
    assert side_call_for("cdn.example.com", "/telemetry/v1", mine).provider == "generic"
    assert side_call_for("api.openai.com", "/telemetry/x", mine).provider == "generic"  # no adapter reads it
    assert side_call_for("api.openai.com", "/v1/chat/completions", mine) is None
    assert side_call_for("api.openai.com", "/v1/traces/ingest", mine).path.status == 204  # the adapter's first
    with pytest.raises(ValueError, match=r"semula_side_paths: '\(' is not a regular expression"):
        compile_side_paths(["("])


# ---------------------------------------------------------------- hosts and paths


@pytest.mark.parametrize(
    ("host", "path", "name"),
    [
        ("generativelanguage.googleapis.com", "/v1beta/openai/chat/completions", "gemini-openai"),
        ("generativelanguage.googleapis.com", "/v1beta/openai/embeddings", "gemini-openai"),
        ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent", "gemini"),
        ("generativelanguage.googleapis.com", "/v1beta/openai/models", "generic"),
        ("api.anthropic.com", "/v1/chat/completions", "anthropic-openai"),
        ("api.anthropic.com", "/v1/messages", "anthropic"),
        ("api.cerebras.ai", "/v1/chat/completions", "cerebras"),
        ("api.fireworks.ai", "/inference/v1/chat/completions", "fireworks"),
        ("api.perplexity.ai", "/chat/completions", "perplexity"),
        ("api.deepinfra.com", "/v1/openai/chat/completions", "deepinfra"),
        ("router.huggingface.co", "/v1/chat/completions", "huggingface"),
        ("api.studio.nebius.com", "/v1/chat/completions", "nebius"),
        ("api.novita.ai", "/v3/openai/chat/completions", "novita"),
        ("us.api.openai.com", "/v1/responses", "openai"),
        ("api.openai.com", "/v1/traces/ingest", "generic"),  # a side call: no adapter reads it
    ],
)
def test_openai_compatible_paths_and_hosts_get_the_openai_reader(host: str, path: str, name: str) -> None:
    assert adapter_for(host, path).name == name
    assert name in PROVIDER_NAMES  # recording files naming it load
    assert host_matches(host, DEFAULT_PROVIDER_HOSTS)


def _canonical(host: str, path: str, body: dict) -> CanonicalRequest:
    raw = RawRequest("POST", host, path, (), {}, json.dumps(body).encode())
    return adapter_for(host, path).canonicalise(raw, KEY)


def test_gemini_openai_path_scrubs_a_volatile_tool_call_id_like_openai() -> None:
    def body(call_id: str) -> dict:
        return {"model": "gemini-2.0-flash", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]}

    path = "/v1beta/openai/chat/completions"
    one = _canonical("generativelanguage.googleapis.com", path, body("pyd_ai_0123456789abcdef0123456789abcdef"))
    two = _canonical("generativelanguage.googleapis.com", path, body("pyd_ai_fedcba9876543210fedcba9876543210"))
    assert one.parsed and one.provider == "gemini-openai" and one.model == "gemini-2.0-flash"
    assert request_fingerprint(one) != request_fingerprint(two)
    assert normalised_fingerprint(one) == normalised_fingerprint(two)


# ---------------------------------------------------------------- Responses `instructions`


def test_responses_instructions_are_not_a_leading_system_message() -> None:
    path = "/v1/responses"
    with_instructions = _canonical("api.openai.com", path, {
        "model": "gpt-4.1", "instructions": "Answer in French.", "input": "Hello"})
    with_system = _canonical("api.openai.com", path, {
        "model": "gpt-4.1", "input": [{"role": "system", "content": "Answer in French."},
                                      {"role": "user", "content": "Hello"}]})
    assert with_instructions.instructions == "Answer in French." and with_instructions.system is None
    assert with_system.system == "Answer in French." and with_system.instructions is None
    assert normalised_fingerprint(with_instructions) != normalised_fingerprint(with_system)
    # Still normalised like any text: spacing and a trailing full stop do not count.
    spaced = _canonical("api.openai.com", path, {
        "model": "gpt-4.1", "instructions": "  Answer   in French ", "input": "Hello"})
    assert normalised_fingerprint(spaced) == normalised_fingerprint(with_instructions)
    assert CanonicalRequest.from_json(with_instructions.to_json()) == with_instructions


def test_a_request_without_instructions_keeps_its_json_and_fingerprints() -> None:
    c = _canonical("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "input": "Hello"})
    assert "instructions" not in c.to_json()
    from semula.core.request.canonical import _normalised_view

    assert "instructions" not in _normalised_view(c, (), (), False, None)


# ---------------------------------------------------------------- options and mitmproxy arguments


def test_extra_hosts_add_to_the_defaults_and_semula_hosts_replaces_them() -> None:
    assert host_list(list(DEFAULT_PROVIDER_HOSTS), ["cdn.example.com,Media.Example.org"]) == (
        *DEFAULT_PROVIDER_HOSTS, "cdn.example.com", "media.example.org")
    assert intercepted_hosts(("semula_extra_hosts=cdn.example.com",)) == (*DEFAULT_PROVIDER_HOSTS, "cdn.example.com")
    assert intercepted_hosts(("semula_hosts=api.openai.com", "semula_extra_hosts=cdn.example.com")) == (
        "api.openai.com", "cdn.example.com")


def test_mitmproxy_decrypts_the_extra_hosts_and_the_defaults(tmp_path: Path) -> None:
    args = mitmproxy_args("auto", "127.0.0.1", 8080, tmp_path, "default", ("semula_extra_hosts=cdn.example.com",),
                          False)
    allowed = [a.split("=", 1)[1] for a in args if a.startswith("allow_hosts=")]
    for target, wanted in (("cdn.example.com:443", True), ("api.openai.com:443", True),
                           ("api.cerebras.ai:443", True), ("other.example.com:443", False)):
        assert any(re.search(r, target, re.IGNORECASE) for r in allowed) is wanted, target


def _trace_flow(host: str = "api.openai.com", path: bytes = b"/v1/traces/ingest"):
    body = json.dumps({"data": [{"object": "trace", "id": "trace_0123"}]}).encode()
    request = tutils.treq(method=b"POST", scheme=b"https", host=host, port=443, path=path, authority=host.encode(),
                          content=body, headers=((b"host", host.encode()), (b"content-type", b"application/json")))
    return tflow.tflow(req=request)


@pytest.mark.parametrize("mode", ["auto", "record", "passthrough", "replay"])
def test_a_side_call_is_never_recorded_nor_refused(tmp_path: Path, mode: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario(addon, tctx):
        flow = _trace_flow()
        addon.requestheaders(flow)
        await addon.request(flow)
        if mode == "replay":  # answered here, as the server would
            assert flow.response is not None and flow.response.status_code == 204
            assert flow.response.headers["x-semula-decision"] == "bypass"
            assert len(addon.parts.refusals.since(0)["refusals"]) == 0
        else:  # forwarded, unrecorded
            assert flow.response is None
            flow.response = tutils.tresp(status_code=204, content=b"", headers=())
            addon.responseheaders(flow)
            await addon.response(flow)
            assert "x-semula-entry" not in flow.response.headers or not flow.response.headers["x-semula-entry"]
        assert flow.comment.startswith("bypass") and "side call: openai-agents trace upload" in flow.comment
        assert flow.id not in addon.flows
        engine = addon.parts.store.engine
        assert engine is None or engine.projects() == [], "nothing was recorded"

    run_addon(scenario, tmp_path, semula_mode=mode)
    line = next(s for s in capsys.readouterr().out.splitlines() if "/v1/traces/ingest" in s)
    assert "openai POST api.openai.com/v1/traces/ingest → bypass (side call: openai-agents trace upload" in line
    assert "recorded" not in line.replace("never recorded", "")


def test_a_bad_side_path_option_is_a_clear_error(tmp_path: Path) -> None:
    addon = SemulaAddon()
    with taddons.context(addon) as tctx:
        with pytest.raises(exceptions.OptionsError, match="semula_side_paths"):
            tctx.configure(addon, semula_data_dir=str(tmp_path / "data"), semula_side_paths=["[unclosed"])
