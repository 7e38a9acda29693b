"""The addon composed of plain parts (issue 22, change 4): mitmproxy still finds every `semula.*` command on
the commands part, the settings carry every option the parts read, and only `configure` reads `ctx.options`."""

from __future__ import annotations

import ast
from pathlib import Path

from addon_harness import run_addon
from test_addon import call, provider_flow

import semula.proxy as proxy_package
from semula.core.settings import AddonSettings

COMMANDS = ("semula.review.list", "semula.review.approve", "semula.review.reject", "semula.status")


def test_mitmproxy_finds_the_semula_commands_on_the_commands_part(tmp_path: Path) -> None:
    async def scenario(addon, tctx):
        registered = tctx.master.commands.commands
        assert all(name in registered for name in COMMANDS)
        assert tctx.master.commands.call("semula.status") == (
            f"mode auto · data dir {addon.parts.settings.data_dir} · store open")
        assert tctx.master.commands.call("semula.review.list") == "semula: no open review candidates"

    run_addon(scenario, tmp_path)


def test_a_mode_change_reaches_the_commands_and_the_hooks(tmp_path: Path) -> None:
    async def scenario(addon, tctx):
        first = await call(addon, provider_flow())
        assert first.response.headers["x-semula-decision"] == "miss"
        tctx.configure(addon, semula_mode="replay")
        assert tctx.master.commands.call("semula.status").startswith("mode replay · ")
        again = await call(addon, provider_flow(), answer=None)
        assert again.response.headers["x-semula-decision"] == "hit"

    run_addon(scenario, tmp_path)


def test_the_settings_carry_the_options_the_parts_read(tmp_path: Path) -> None:
    async def scenario(addon, tctx):
        settings = addon.parts.settings
        assert settings.confdir == str(tmp_path / "conf")
        assert settings.store is None and settings.embeddings is False
        assert settings.listen_host == tctx.options.listen_host
        assert settings.listen_port == tctx.options.listen_port

    run_addon(scenario, tmp_path)


def test_a_store_url_stays_out_of_the_settings_repr() -> None:
    settings = AddonSettings(store="postgresql://semula:hunter2@db.example/semula")
    assert "hunter2" not in repr(settings)


def _reads_ctx_options(path: Path) -> list[str]:
    """The functions in `path` whose code reads `ctx.options` (not its docstrings)."""
    found = []
    for function in ast.walk(ast.parse(path.read_text())):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [function.name for node in ast.walk(function) if isinstance(node, ast.Attribute)
                      and node.attr == "options" and isinstance(node.value, ast.Name) and node.value.id == "ctx"]
    return found


def test_only_configure_reads_ctx_options() -> None:
    folder = Path(proxy_package.__file__).parent
    readers = {path.relative_to(folder).as_posix(): names for path in folder.rglob("*.py")
               if (names := _reads_ctx_options(path))}
    assert readers == {"addon.py": ["configure"]}
