"""`semula report` writes one self-contained HTML page, also for empty logs.

The demo-log report and the empty-log report are each built once per module;
the CLI wiring is checked with a fake `build_report` so it costs no kernels.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import duckdb
import nbformat
import pytest
from click.testing import CliRunner

pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")

import semula  # noqa: E402
import semula.reporting.report as report_module  # noqa: E402
from semula.cli.report_cmd import report  # noqa: E402
from semula.reporting.report import ReportError, build_report, execute_notebooks, render_html  # noqa: E402

from shared_paths import REPO, import_path  # noqa: E402

pytestmark = pytest.mark.slow  # the quick subset (`scripts/test --quick`) leaves it out


demo = import_path("make_demo_calls", REPO / "scripts" / "make_demo_calls.py")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("semula-data")
    demo.generate(path, days=10, seed=3, end=date(2025, 6, 30))
    return path


@pytest.fixture(scope="module")
def demo_report(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = build_report(demo_dir, tmp_path_factory.mktemp("out") / "nested" / "report.html", progress=False)
    assert out.is_file() and out.name == "report.html"
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def empty_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    data_dir = tmp_path_factory.mktemp("empty")
    (data_dir / "calls").mkdir()  # a fresh install: folders, no files yet
    return build_report(data_dir, data_dir / "report.html", progress=False).read_text(encoding="utf-8")


def test_plots_are_inline(demo_report: str) -> None:
    assert demo_report.count("data:image/png;base64,") >= 8


def test_report_is_self_contained(demo_report: str) -> None:
    external = re.findall(r'(?:src|href)="(https?:[^"]*)"', demo_report)
    assert external == []
    assert "<script" not in demo_report


def test_every_notebook_is_a_section_and_none_failed(demo_report: str) -> None:
    for section in ("overview", "savings", "thresholds", "review-queue"):
        assert f'id="{section}"' in demo_report
    assert "Traceback" not in demo_report
    assert 'class="banner failed"' not in demo_report
    assert "SEMULA_RESULTS" not in demo_report  # the machine-readable line is hidden
    assert "How to read this notebook" in demo_report
    assert "import matplotlib" not in demo_report  # code is hidden


def test_summary_card_matches_the_logs(demo_report: str, demo_dir: Path) -> None:
    hits, lookups = duckdb.sql(
        f"""
        SELECT count(*) FILTER (WHERE decision = 'hit'),
               count(*) FILTER (WHERE decision IN ('hit', 'miss', 'error') AND mode <> 'record')
        FROM read_parquet('{demo_dir}/calls/**/*.parquet', union_by_name=true)"""
    ).fetchone()
    assert f'<div class="value">{hits / lookups:.1%}</div><div class="label">hit rate</div>' in demo_report


def test_empty_log_says_so_without_a_traceback(empty_report: str) -> None:
    assert "No calls logged yet in" in empty_report
    assert "no calls logged yet in" in empty_report  # each notebook says it too
    assert "make_demo_calls.py" in empty_report
    assert "Traceback" not in empty_report
    assert 'class="banner failed"' not in empty_report


def test_failing_notebook_is_shown_then_raised(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
    nbformat.write(notebook, broken)
    (run,) = execute_notebooks([broken], tmp_path)
    assert run.error is not None and "ZeroDivisionError" in run.error
    page = render_html([run], tmp_path)
    assert 'class="banner failed"' in page and "ZeroDivisionError" in page


def test_missing_analysis_folder_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semula, "__file__", str(tmp_path / "site-packages" / "semula" / "__init__.py"))
    monkeypatch.setattr(report_module, "_packaged_analysis", lambda: tmp_path / "no-copy")
    with pytest.raises(ReportError, match="analysis notebooks not found in .*no-copy .*semula_logs.py"):
        build_report(tmp_path, tmp_path / "report.html", progress=False)


def notebook_folder(path: Path, without: str = "") -> Path:
    path.mkdir(parents=True)
    for name in [*(name for name, _ in report_module.NOTEBOOKS), report_module.NOTEBOOK_LOADER]:
        if name != without:
            (path / name).write_text("{}", encoding="utf-8")
    return path


def test_the_checkout_analysis_folder_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editable install: the notebooks are read where people edit them, even if a packaged copy exists."""
    assert report_module.analysis_dir() == REPO / "analysis"
    monkeypatch.setattr(report_module, "_packaged_analysis", lambda: notebook_folder(tmp_path / "packaged"))
    assert report_module.analysis_dir() == REPO / "analysis"


def test_a_wheel_install_uses_its_packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No addon/ above the package (site-packages): the copy the wheel carries; an incomplete copy is an error."""
    monkeypatch.setattr(semula, "__file__", str(tmp_path / "site-packages" / "semula" / "__init__.py"))
    notebook_folder(tmp_path / "analysis")  # beside a non-checkout install: not taken for a checkout
    packaged = notebook_folder(tmp_path / "packaged")
    monkeypatch.setattr(report_module, "_packaged_analysis", lambda: packaged)
    assert report_module.analysis_dir() == packaged
    broken = notebook_folder(tmp_path / "broken", without=report_module.NOTEBOOK_LOADER)
    monkeypatch.setattr(report_module, "_packaged_analysis", lambda: broken)
    with pytest.raises(ReportError, match="not found in .*broken"):
        report_module.analysis_dir()


def test_the_packaged_copy_is_looked_for_inside_the_package() -> None:
    packaged = report_module._packaged_analysis()
    assert packaged == Path(report_module.__file__).parent / "notebooks"


def test_cli_passes_options_and_prints_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_build_report(data_dir: Path, out: Path, progress: bool = True, recordings: object = None) -> Path:
        calls.append((data_dir, out, progress))
        return out

    monkeypatch.setattr(report_module, "build_report", fake_build_report)
    runner = CliRunner()
    result = runner.invoke(report, ["--data-dir", str(tmp_path), "--out", str(tmp_path / "r.html"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert calls == [(tmp_path, tmp_path / "r.html", False)]
    assert result.output.strip() == str(tmp_path / "r.html")

    calls.clear()
    result = runner.invoke(report, [], env={"SEMULA_DATA_DIR": str(tmp_path / "from-env")})
    assert result.exit_code == 0, result.output
    assert calls == [(tmp_path / "from-env", Path("report.html"), True)]


def test_cli_turns_a_report_error_into_exit_code_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_build_report(data_dir: Path, out: Path, progress: bool = True, recordings: object = None) -> Path:
        raise ReportError("overview.ipynb failed")

    monkeypatch.setattr(report_module, "build_report", failing_build_report)
    result = CliRunner().invoke(report, ["--quiet"])
    assert result.exit_code == 1
    assert "overview.ipynb failed" in result.output


def test_the_price_table_is_shown_under_its_heading(demo_report: str) -> None:
    heading = demo_report.index("Price table (edit me)")
    table = demo_report.index("input USD / 1M tokens")
    assert heading < table < demo_report.index("Totals", heading), "the prices show before the next section"


def test_error_text_wraps_instead_of_scrolling() -> None:
    css = " ".join(report_module._CSS.split())
    assert "table.semula td.txt { white-space: normal; overflow-wrap: anywhere;" in css
    pre = re.search(r"pre \{[^}]*\}", css).group()
    assert "pre-wrap" in pre and "overflow-x" not in pre
