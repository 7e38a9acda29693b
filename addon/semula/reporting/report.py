"""`semula report`: run the analysis notebooks on the current logs, write one HTML file.

Why notebooks rather than a second implementation: the notebooks in the repo's
analysis/ folder are where the questions ("is the cache doing its job?") are
answered and explained; the report is those same notebooks executed headless on
today's Parquet logs, with code hidden and plots inlined, so the two can never
disagree. A wheel carries a copy of them in semula/reporting/notebooks/ (setup.py
copies analysis/ there at build time), so the report runs from a plain install too.
Each notebook ends by printing one `SEMULA_RESULTS <json>` line; the report reads
it for its summary and tests read it to check the numbers.

Only the Parquet logs are read (the notebooks point DuckDB at them via
SEMULA_DATA_DIR), never the live semula.duckdb store the proxy holds open.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import html
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

NOTEBOOKS: tuple[tuple[str, str], ...] = (
    ("overview.ipynb", "Overview"),
    ("savings.ipynb", "Savings"),
    ("thresholds.ipynb", "Thresholds"),
    ("review.ipynb", "Review queue"),
)
RESULTS_PREFIX = "SEMULA_RESULTS "
RESULTS_TAG = "semula-results"  # the cell that prints the results line; hidden in the report
CELL_TIMEOUT_S = 300
NOTEBOOK_LOADER = "semula_logs.py"  # the notebooks' shared loader, imported from their own folder


class ReportError(Exception):
    """The report could not be built, or a notebook failed while building it."""


@dataclass(frozen=True)
class NotebookRun:
    """One executed notebook: its outputs, its key numbers and whether it failed."""

    filename: str
    title: str
    notebook: Any  # nbformat.NotebookNode, executed
    results: dict[str, Any] | None
    error: str | None
    seconds: float


@dataclass
class _Progress:
    """A rich progress bar over all code cells, or nothing when `enabled` is False."""

    enabled: bool
    total: int
    _bar: Any = field(default=None, init=False)
    _task: Any = field(default=None, init=False)

    def __enter__(self) -> _Progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not self.enabled,
        )
        self._bar.__enter__()
        self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)

    def describe(self, text: str) -> None:
        self._bar.update(self._task, description=text)

    def advance(self, cells: int = 1) -> None:
        self._bar.advance(self._task, cells)

    @property
    def completed(self) -> int:
        return int(self._bar.tasks[0].completed)


def _checkout_analysis() -> Path | None:
    """The repo's analysis/ folder when semula runs from its source tree (addon/semula: an editable install)."""
    import semula

    package = Path(semula.__file__).resolve().parent
    return package.parents[1] / "analysis" if package.parent.name == "addon" else None


def _packaged_analysis() -> Path | None:
    """The copy a wheel carries (semula/reporting/notebooks/); None in a zipped install: kernels need real files."""
    packaged = resources.files("semula.reporting").joinpath("notebooks")
    return packaged if isinstance(packaged, Path) else None


def analysis_dir() -> Path:
    """The folder of the notebooks: the checkout's analysis/ (edited there), else the wheel's copy.

    A notebook imports semula_logs.py from its own folder, which is the kernel's working folder.
    """
    needed = [*(name for name, _ in NOTEBOOKS), NOTEBOOK_LOADER]
    searched = [path for path in (_checkout_analysis(), _packaged_analysis()) if path is not None]
    for path in searched:
        if all((path / name).is_file() for name in needed):
            return path
    raise ReportError(
        f"analysis notebooks not found in {' or '.join(map(str, searched)) or 'this install'} "
        f"(the report needs {', '.join(needed)}); reinstall semula (`pip install 'semula[analysis]'`) or, "
        "from a source checkout, `pip install -e '.[analysis]'`"
    )


def notebook_results(notebook: Any) -> dict[str, Any] | None:
    """The JSON from the last `SEMULA_RESULTS` line a notebook printed, if any."""
    found = None
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream":
                continue
            for line in output.get("text", "").splitlines():
                if line.startswith(RESULTS_PREFIX):
                    found = json.loads(line[len(RESULTS_PREFIX) :])
    return found


# The kernel picks its TCP ports free at the moment it is launched and binds them a little later: another
# process may take one between the two ("Address already in use" in the kernel, which then dies before it
# answers). Nothing ran yet, so the notebook gets a new kernel, on new ports.
KERNEL_NOT_STARTED = "Kernel died before replying to kernel_info"
KERNEL_START_ATTEMPTS = 3


@functools.cache
def _kernel_manager_class() -> type:
    """Kernels for *this* interpreter: a user-level python3 kernelspec could point elsewhere."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class ThisInterpreterKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _no_kernel_dirs(self) -> KernelSpecManager:
            # With no kernel dirs, "python3" falls back to ipykernel's built-in spec: sys.executable.
            return KernelSpecManager(kernel_dirs=[])

    return ThisInterpreterKernelManager


def _kernel_config() -> Any:
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from traitlets.config import Config

    config = Config()
    if "transport_encryption" in AsyncKernelManager.class_trait_names() and zmq.has("curve"):
        # Encrypted kernel sockets, and no "running over TCP without encryption" warning.
        config.AsyncKernelManager.transport_encryption = "auto"
    return config


async def _execute(
    path: Path,
    data_dir: Path,
    on_cell: Callable[[str], None] | None,
    timeout: int,
    limiter: asyncio.Semaphore,
) -> NotebookRun:
    """Execute one notebook against `data_dir`; a failing cell is recorded, not raised."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    env = {**os.environ, "SEMULA_DATA_DIR": str(data_dir)}
    env.pop("MPLBACKEND", None)  # a headless Agg setting would swallow the inline plots
    async with limiter:
        started = time.monotonic()
        for attempt in range(KERNEL_START_ATTEMPTS):
            notebook = nbformat.read(path, as_version=4)
            client = NotebookClient(
                notebook,
                kernel_manager_class=_kernel_manager_class(),
                kernel_name="python3",
                config=_kernel_config(),
                timeout=timeout,
                resources={"metadata": {"path": str(path.parent)}},  # run where the notebook lives
                on_cell_executed=(lambda **_: on_cell(path.name)) if on_cell else None,
            )
            error = None
            try:
                await client.async_execute(env=env)
            except CellExecutionError as e:
                error = f"{e.ename}: {e.evalue}" if getattr(e, "ename", None) else str(e).strip().splitlines()[-1]
            except (CellTimeoutError, DeadKernelError, RuntimeError) as e:
                error = f"{type(e).__name__}: {e}"
                if KERNEL_NOT_STARTED in str(e) and attempt + 1 < KERNEL_START_ATTEMPTS:
                    continue  # no cell ran: start a new kernel (new ports)
            break
        seconds = time.monotonic() - started
    return NotebookRun(
        filename=path.name,
        title=dict(NOTEBOOKS).get(path.name, path.stem),
        notebook=notebook,
        results=notebook_results(notebook),
        error=error,
        seconds=seconds,
    )


def execute_notebooks(
    paths: list[Path],
    data_dir: Path,
    on_cell: Callable[[str], None] | None = None,
    parallel: int | None = None,
    timeout: int = CELL_TIMEOUT_S,
) -> list[NotebookRun]:
    """Execute notebooks side by side, each in its own kernel, and return them in order.

    Kernel start-up and imports dominate a run, so running kernels concurrently
    roughly halves the wall time even on two cores. `on_cell(filename)` is called
    after every executed code cell.
    """
    from nbclient.util import run_sync

    parallel = parallel or min(len(paths), max(2, os.cpu_count() or 1))

    async def run_all() -> list[NotebookRun]:
        limiter = asyncio.Semaphore(max(1, parallel))
        return list(await asyncio.gather(*(_execute(p, data_dir, on_cell, timeout, limiter) for p in paths)))

    return run_sync(run_all)()


def build_report(data_dir: Path, out: Path, progress: bool = True, recordings: dict[str, Any] | None = None) -> Path:
    """Execute every analysis notebook on `data_dir`'s logs and write one self-contained HTML file.

    Works on an empty or missing log (the report says there is nothing yet). If a
    notebook fails the report is still written, showing the error, and then
    ReportError is raised so a CI job notices. `recordings`: the folder's ages and SDKs
    (`recordings.usage.provenance_summary`), shown when given.
    """
    try:
        import nbformat
    except ImportError as e:  # the notebooks' toolchain is an optional extra
        raise ReportError(
            f"`semula report` needs the analysis extra: pip install 'semula[analysis]' "
            f"(from a source checkout: pip install -e '.[analysis]') ({e})"
        ) from e

    data_dir = Path(data_dir).expanduser().resolve()
    out = Path(out).expanduser().resolve()
    paths = [analysis_dir() / name for name, _ in NOTEBOOKS]
    total = sum(
        1 for p in paths for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code" and c.source.strip()
    )
    with _Progress(progress, total) as bar:
        bar.describe(f"running {len(paths)} notebooks on {data_dir.name or data_dir}")
        runs = execute_notebooks(paths, data_dir, on_cell=lambda name: bar.advance())
        bar.advance(total - bar.completed)  # cells skipped after a failure
        bar.describe(f"writing {out.name}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_html(runs, data_dir, recordings), encoding="utf-8")

    failed = [run for run in runs if run.error]
    if failed:
        names = "; ".join(f"{run.filename}: {run.error}" for run in failed)
        raise ReportError(f"{len(failed)} notebook(s) failed ({names}); the report at {out} shows where")
    return out


# --- HTML -------------------------------------------------------------------------

_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2329; margin: 0; background: #f6f7f9; }
main, header, nav { max-width: 1100px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 28px; }
header h1 { margin: 0 0 4px; font-size: 28px; }
.meta { color: #5f6b76; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 18px 0; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 10px 16px; min-width: 130px; }
.card .value { font-size: 22px; font-weight: 600; }
.card .label { color: #5f6b76; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.banner { border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
.banner.empty { background: #fff8e1; border: 1px solid #f2d27a; }
.banner.failed { background: #fdecea; border: 1px solid #f1a9a0; }
nav { margin: 8px auto 0; }
nav a { margin-right: 16px; color: #1f6feb; text-decoration: none; font-weight: 500; }
section.notebook { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 8px 28px 24px; margin: 20px 0; }
section.notebook > .timing { color: #5f6b76; font-size: 12px; margin-top: 10px; }
.anchor-link { display: none; }
img { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: 8px 12px; border-radius: 6px; font-size: 13px; white-space: pre-wrap; overflow-wrap: anywhere; }
table.semula { border-collapse: collapse; margin: 10px 0; font-size: 13px; display: block; overflow-x: auto; }
table.semula th, table.semula td { border-bottom: 1px solid #e6e8eb; padding: 4px 10px; text-align: left; white-space: nowrap; }
table.semula th { background: #f0f2f5; }
/* Text cells (an error message, a guard reason) wrap instead of hiding behind a scrollbar. */
table.semula td.txt { white-space: normal; overflow-wrap: anywhere; min-width: 8em; max-width: 60ch; }
table.semula td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.more { color: #5f6b76; font-size: 12px; }
code { background: #f0f2f5; padding: 1px 4px; border-radius: 4px; font-size: 90%; }
.output_stderr pre, .output_error pre { background: #fdecea; }
"""


def _esc(text: object) -> str:
    return html.escape(str(text))


def _cards(runs: list[NotebookRun]) -> str:
    """Headline numbers from each notebook's results line."""
    results = {run.filename: run.results or {} for run in runs}
    overview = results.get("overview.ipynb", {})
    savings = results.get("savings.ipynb", {})
    review = results.get("review.ipynb", {})
    cards: list[tuple[str, str]] = []
    if overview.get("calls"):
        cards.append(("calls logged", f"{overview['calls']:,}"))
        if overview.get("hit_rate") is not None:
            cards.append(("hit rate", f"{overview['hit_rate']:.1%}"))
        tools = overview.get("tool_calls") or {}
        if tools.get("lookups"):  # an agent's MCP tools beside its model
            model = overview.get("model_calls") or {}
            if model.get("lookups"):
                cards.append(("model hit rate", f"{model['hits'] / model['lookups']:.1%}"))
            cards.append(("tool-call hit rate", f"{tools['hits'] / tools['lookups']:.1%}"))
        cards.append(("replay-mode failures", f"{overview.get('replay_failures', 0):,}"))
    if savings.get("hits"):
        tokens = savings.get("tokens_saved_prompt", 0) + savings.get("tokens_saved_completion", 0)
        cards.append(("tokens saved", f"{tokens:,}"))
        cards.append(("USD saved", f"${savings.get('usd_saved', 0):,.2f}"))
        cards.append(("hours saved", f"{savings.get('ms_saved', 0) / 3.6e6:,.1f}"))
    if review.get("candidates"):
        cards.append(("open candidates", f"{review.get('open', 0):,}"))
        if review.get("approval_rate") is not None:
            cards.append(("approval rate", f"{review['approval_rate']:.0%}"))
    return "".join(
        f'<div class="card"><div class="value">{_esc(v)}</div><div class="label">{_esc(k)}</div></div>'
        for k, v in cards
    )


def _notebook_body(run: NotebookRun) -> str:
    from nbconvert import HTMLExporter

    notebook = copy.deepcopy(run.notebook)
    notebook.cells = [c for c in notebook.cells if RESULTS_TAG not in c.get("metadata", {}).get("tags", [])]
    exporter = HTMLExporter(
        template_name="basic",  # body only: no CDN scripts, our own small stylesheet
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    body, _ = exporter.from_notebook_node(notebook)
    return body


def _recordings_section(summary: dict[str, Any] | None) -> str:
    """The recordings' ages and the SDK versions that made them (from the files' provenance)."""
    if not summary or not summary.get("recordings"):
        return ""
    ages = "".join(f'<tr><td>{_esc(label)}</td><td class="num">{count:,}</td></tr>'
                   for label, count in summary["ages"])
    sdks = "".join(f'<tr><td class="txt">{_esc(row["sdk"])}</td><td class="num">{row["recordings"]:,}</td>'
                   f'<td>{_esc(row["oldest"])}</td></tr>' for row in summary["sdks"][:20])
    return ('<section class="notebook" id="recordings"><h2>Recordings: ages and SDKs</h2>'
            f'<p class="meta">{summary["recordings"]:,} recording(s) in <code>{_esc(summary["folder"])}</code>; '
            "<code>semula recordings stale</code> lists the expired ones.</p>"
            f'<table class="semula"><tr><th>recorded</th><th>recordings</th></tr>{ages}</table>'
            '<table class="semula"><tr><th>SDK (user-agent)</th><th>recordings</th><th>oldest</th></tr>'
            f"{sdks}</table></section>")


def render_html(runs: list[NotebookRun], data_dir: Path, recordings: dict[str, Any] | None = None) -> str:
    """One page: headline cards, then each executed notebook with its code hidden."""
    overview = next((run.results for run in runs if run.filename == "overview.ipynb"), None)
    banners = []
    if overview is not None and not overview.get("calls"):  # ran fine, found nothing
        banners.append(
            f'<div class="banner empty"><strong>No calls logged yet in {_esc(data_dir)}</strong> — '
            "run some traffic through semula or <code>scripts/make_demo_calls.py</code>, then run "
            "<code>semula report</code> again.</div>"
        )
    for run in runs:
        if run.error:
            banners.append(
                f'<div class="banner failed"><strong>{_esc(run.filename)} failed:</strong> {_esc(run.error)}</div>'
            )
    nav = "".join(f'<a href="#{_esc(run.title.lower().replace(" ", "-"))}">{_esc(run.title)}</a>' for run in runs)
    sections = "".join(
        f'<section class="notebook" id="{_esc(run.title.lower().replace(" ", "-"))}">'
        f'<div class="timing">{_esc(run.filename)} · executed in {run.seconds:.1f} s</div>'
        f"{_notebook_body(run)}</section>"
        for run in runs
    )
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>semula report — {_esc(data_dir.name or data_dir)}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>Is the cache doing its job?</h1><div class="meta">semula report · logs in '
        f"<code>{_esc(data_dir)}</code> · generated {generated} · Python {sys.version.split()[0]}</div>"
        f'<div class="cards">{_cards(runs)}</div>{"".join(banners)}</header>'
        f"<nav>{nav}</nav><main>{_recordings_section(recordings)}{sections}</main></body></html>\n"
    )
