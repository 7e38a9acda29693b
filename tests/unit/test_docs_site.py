"""The docs site (mkdocs.yml, docs/) builds strictly, its references are generated from the code, and the
README stays a start page whose links all lead somewhere.

`mkdocs build --strict` fails on a broken link or anchor between pages (mkdocs.yml's `validation`), a
missing page of the nav and a missing included file (`pymdownx.snippets` `check_paths`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

pytestmark = pytest.mark.slow  # builds the docs site with MkDocs: the whole suite runs it, --quick does not

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def test_the_command_reference_has_every_command_and_option(site: Path) -> None:
    from semula.cli import main

    html = page(site, "reference/commands")
    ctx = click.Context(main, info_name="semula")
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        assert f"semula {name}</code>" in html, name
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[0] in html, f"semula {name} {param.opts[0]}"
        if isinstance(command, click.Group):
            for sub in command.list_commands(click.Context(command, info_name=name, parent=ctx)):
                assert f"semula {name} {sub}</code>" in html, f"semula {name} {sub}"


def test_the_option_reference_has_every_declared_option(site: Path) -> None:
    from semula.cli.proxy_cmd import declared_options

    html = page(site, "reference/options")
    for option in declared_options():
        assert f"<code>{option.name}</code>" in html, option.name
    assert "<!-- semula:" not in html


def test_the_pytest_page_lists_the_plugins_options(site: Path) -> None:
    html = page(site, "pytest")
    for option in ("--semula=", "--semula-recordings=DIR", "--semula-scope=", "--semula-port=N"):
        assert option in html, option


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is a real check: a copy of the docs with one bad anchor does not build."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("mkdocs.yml", "certs_readme.md"):
        (copy / name).write_text((REPO / name).read_text())
    (copy / "scripts").symlink_to(REPO / "scripts")
    (copy / "docs").mkdir()
    for path in (REPO / "docs").rglob("*"):
        if path.is_file():
            target = copy / "docs" / path.relative_to(REPO / "docs")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    broken = copy / "docs" / "getting-started.md"
    broken.write_text(broken.read_text() + "\nSee [nowhere](troubleshooting.md#no-such-anchor).\n")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=copy, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0 and "no-such-anchor" in result.stdout + result.stderr


def test_every_docs_page_is_in_the_nav() -> None:
    import yaml

    def paths(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in paths(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in paths(value)]
        return []

    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert pages == set(paths(config["nav"]))


def test_readme_is_a_start_page_whose_links_resolve() -> None:
    readme = (REPO / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:15])
    assert "semula proxy" in first_screen and "semula exec --mode replay -- pytest" in first_screen
    assert "pipx install semula" in readme and "uv tool install semula" in readme and "scripts/run" in readme
    assert len(readme.splitlines()) < 150, "the reference belongs in docs/"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target
