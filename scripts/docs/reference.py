"""The docs site's reference, generated from the code so it cannot drift: a MkDocs hook (mkdocs.yml `hooks:`).

A page holds a marker where generated text goes; at build time `on_page_markdown` replaces it:

- `<!-- semula:commands -->`: every `semula` command and subcommand (the click group in `semula.cli`):
  its usage, help, arguments and options, as `--help` shows them;
- `<!-- semula:options -->`: every `semula_*` option the addon declares (`semula.cli.proxy_cmd.declared_options`,
  the list `semula proxy --help` prints), with its default and choices;
- `<!-- semula:pytest-options -->`: the pytest plugin's command-line options (`semula.pytest_plugin`).

`python scripts/docs/reference.py [commands|options|pytest-options]` prints one of them.
Defaults that follow a `SEMULA_*` variable are shown as they are with none set.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

MARKER = "<!-- semula:{} -->"


@contextlib.contextmanager
def without_semula_variables() -> Iterator[None]:
    """Hide the builder's SEMULA_* variables: some defaults are read from them when declared."""
    saved = {name: value for name, value in os.environ.items() if name.startswith("SEMULA_")}
    for name in saved:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(saved)


def escape(text: str) -> str:
    """Help text as Markdown prose: `<data dir>` must not become a tag, `*.suffix` no emphasis."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*").replace("_", r"\_")


def code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def paragraph(text: str) -> str:
    """click's help text (without its `\\b` no-rewrap marks) as one Markdown paragraph per blank-line block."""
    blocks = inspect.cleandoc(text).replace("\b\n", "").split("\n\n")
    return "\n\n".join(escape(" ".join(block.split())) for block in blocks if block.strip())


def command_section(command: click.Command, ctx: click.Context, level: int) -> list[str]:
    path = ctx.command_path
    lines = [f"{'#' * level} `{path}`", ""]
    if command.help:
        lines += [paragraph(command.help), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```", f"{path} {usage}".rstrip(), "```", ""]
    arguments = [p for p in command.get_params(ctx) if isinstance(p, click.Argument)]
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if arguments:
        lines += ["Arguments:", ""]
        for argument in arguments:
            many = " (one or more)" if argument.nargs == -1 else ""
            lines.append(f"- {code(argument.human_readable_name)}{'' if argument.required else ' (optional)'}{many}")
        lines.append("")
    if options:
        lines += ["Options:", ""]
        for option in options:
            record = option.get_help_record(ctx)
            if record is None:
                continue
            names, help_text = record
            lines.append(f"- {code(names)}" + (f": {escape(' '.join(help_text.split()))}" if help_text else ""))
        lines.append("")
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            lines += command_section(sub, click.Context(sub, info_name=name, parent=ctx), min(level + 1, 6))
    return lines


def commands_markdown() -> str:
    from semula.cli import main

    with without_semula_variables():
        root = click.Context(main, info_name="semula")
        lines = [f"Every command `semula --help` lists ({len(main.list_commands(root))}), with its subcommands.", ""]
        for name in main.list_commands(root):
            command = main.get_command(root, name)
            if command is not None and not command.hidden:
                lines += command_section(command, click.Context(command, info_name=name, parent=root), 2)
    return "\n".join(lines).rstrip() + "\n"


def shown_default(value: Any) -> str:
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, list | tuple):
        return ", ".join(code(item) for item in value) if value else "none"
    return code(str(value)) if str(value) else "none"


def options_markdown() -> str:
    from semula.cli.proxy_cmd import declared_options

    with without_semula_variables():
        declared = declared_options()
    lines = ["| option | default | what it does |", "|---|---|---|"]
    long_defaults = []
    for option in declared:
        choices = f" (one of {', '.join(code(c) for c in option.choices)})" if option.choices else ""
        help_text = escape(option.help).replace("|", r"\|")
        default = shown_default(option.default)
        if isinstance(option.default, list) and len(option.default) > 3:
            long_defaults.append(option)
            default = f"{len(option.default)} hosts (below)"
        lines.append(f"| `{option.name}` | {default} | {help_text}{choices} |")
    for option in long_defaults:
        lines += ["", f"The default of `{option.name}`: {shown_default(option.default)}."]
    return "\n".join(lines) + "\n"


class _OptionCollector:
    """Stands in for pytest's parser and option group: keeps what the plugin's `pytest_addoption` adds."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionCollector:
        return self

    def addoption(self, *names: str, **attributes: Any) -> None:
        self.options.append((names, attributes))

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def pytest_options_markdown() -> str:
    from semula import pytest_plugin

    collector = _OptionCollector()
    with without_semula_variables():
        pytest_plugin.pytest_addoption(collector)  # type: ignore[arg-type]
    lines = []
    for names, attributes in collector.options:
        value = attributes.get("metavar") or ("{" + ",".join(attributes["choices"]) + "}" if "choices" in attributes
                                              else None)
        shown = ", ".join(f"{name}={value}" if value else name for name in names)
        lines.append(f"- {code(shown)}: {escape(' '.join(attributes.get('help', '').split()))}")
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "commands": commands_markdown,
    "options": options_markdown,
    "pytest-options": pytest_options_markdown,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: each marker alone on its line becomes its generated text (one quoted in prose stays)."""
    for name, generate in GENERATORS.items():
        marker = re.compile(rf"^{re.escape(MARKER.format(name))}$", re.M)
        if marker.search(markdown):
            markdown = marker.sub(lambda _: generate(), markdown)
    return markdown


if __name__ == "__main__":
    print(GENERATORS[sys.argv[1] if len(sys.argv) > 1 else "commands"](), end="")
