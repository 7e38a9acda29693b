"""`semula embeddings fetch|status|backfill`: the opt-in embedding tier's model and vectors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from semula.admin.protocol import read_admin_info
from semula.cli.common import console, data_dir_option
from semula.embeddings.model import Embedder, EmbeddingsUnavailable, config_from_env, embedding_text, fetch
from semula.store.base import RecordingStore
from semula.store.selection import open_store, store_spec, vector_status
from semula.store.types import StoreError


@click.group()
def embeddings() -> None:
    """The opt-in embedding tier (SEMULA_EMBEDDINGS=on): model download, status, backfill."""


@embeddings.command("fetch")
@data_dir_option
def embeddings_fetch(data_dir: Path) -> None:
    """Download the model (SEMULA_EMBEDDINGS_MODEL, default BAAI/bge-small-en-v1.5) into <data dir>/models."""
    config = config_from_env(data_dir, option_enabled=True)
    console.print(f"fetching {config.model_name} into {config.cache_dir} …")
    try:
        path = fetch(config)
    except EmbeddingsUnavailable as e:
        raise click.ClickException(str(e)) from None
    console.print(f"[green]ok[/green]: {config.model_name} is at {path}")


@embeddings.command("status")
@data_dir_option
def embeddings_status(data_dir: Path) -> None:
    """The tier's settings, whether the extra and the model load, and the vectors stored per model."""
    try:
        config = config_from_env(data_dir)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    console.print(f"enabled:    {'on' if config.enabled else 'off'} (SEMULA_EMBEDDINGS)")
    console.print(f"model:      {config.model_name}")
    console.print(f"model path: {config.model_path or '-'}")
    console.print(f"offline:    {'on' if config.offline else 'off'}")
    console.print(f"cache dir:  {config.cache_dir}")
    # Status never downloads: it only looks at what is on disk.
    local = type(config)(enabled=config.enabled, model_name=config.model_name, model_path=config.model_path,
                         offline=True, cache_dir=config.cache_dir)
    try:
        started = time.perf_counter()
        embedder = Embedder.load(local)
        load_ms = (time.perf_counter() - started) * 1000
        embedder.embed(["warm up"])
        started = time.perf_counter()
        dim = embedder.embed(["How do I sort a list in Python?"]).shape[1]
        console.print(f"model:      [green]loads[/green] in {load_ms:.0f} ms, {dim} dimensions, "
                      f"{(time.perf_counter() - started) * 1000:.1f} ms per short text")
    except EmbeddingsUnavailable as e:
        console.print(f"model:      [red]unavailable[/red]: {e}")
    spec = store_spec(data_dir)  # a shared store is read directly, proxies or not
    if spec.file is not None and read_admin_info(data_dir) is not None:
        console.print(f"vectors:    the running proxy holds {spec.file}; stop it to count vectors here")
        return
    if spec.file is not None and not spec.file.is_file():
        console.print(f"vectors:    no store at {spec.file}")
        return
    try:
        status = vector_status(spec, config.model_name)
    except StoreError as e:  # "cannot open …" or "cannot read …"
        console.print(f"vectors:    {e}")
        return
    if status.counts is None:
        console.print(f"vectors:    none yet ({status.entries} entries; the table is made when the proxy starts)")
        return
    console.print(f"entries:    {status.entries}")
    if not status.counts:
        console.print("vectors:    none")
    for model, n in status.counts.items():
        console.print(f"vectors:    {n} for {model}")
    if status.missing is not None:
        console.print(f"            {status.missing} entries have no {config.model_name} vector: "
                      "run `semula embeddings backfill`")


@embeddings.command("backfill")
@data_dir_option
@click.option("--batch-size", type=int, default=64, show_default=True)
def embeddings_backfill(data_dir: Path, batch_size: int) -> None:
    """Give every entry without a vector from the configured model its vector."""
    if store_spec(data_dir).file is not None and read_admin_info(data_dir) is not None:
        raise click.ClickException(
            f"a running proxy holds the store in {data_dir}: stop it first (its worker embeds new entries itself)")
    try:
        config = config_from_env(data_dir, option_enabled=True)
        embedder = Embedder.load(config)
    except (ValueError, EmbeddingsUnavailable) as e:
        raise click.ClickException(str(e)) from None
    try:
        store = open_store(store_spec(data_dir), follow=False)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    done = 0
    try:
        table = store.vectors
        table.ensure_table()
        total = table.count_without(embedder.name)
        if total == 0:
            console.print(f"every entry already has a {embedder.name} vector")
            return
        patterns: dict[str, tuple[str, ...]] = {}
        started = time.perf_counter()
        with Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console) as progress:
            task = progress.add_task("backfill", total=total)
            while True:
                batch = table.entries_without(embedder.name, batch_size)
                if not batch:
                    break
                texts = [embedding_text(canonical, _scrub_patterns(store, project, patterns))
                         for _, project, canonical in batch]
                vectors = embedder.embed(texts)
                table.put(embedder.name, [(entry_id, vectors[i]) for i, (entry_id, _, _) in enumerate(batch)])
                done += len(batch)
                progress.advance(task, len(batch))
        seconds = time.perf_counter() - started
        console.print(f"[green]ok[/green]: {done} entries embedded with {embedder.name} in {seconds:.1f} s")
    except Exception as e:  # store errors, model errors: say what happened, keep what was written
        raise click.ClickException(f"backfill stopped after {done} entries: {type(e).__name__}: {e}") from None
    finally:
        store.close()


def _scrub_patterns(store: RecordingStore, project: str, cache: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    if project not in cache:
        try:
            value: Any = store.project_settings(project).get("scrub_patterns") or ()
        except StoreError:
            value = ()
        cache[project] = tuple(str(p) for p in value) if isinstance(value, (list, tuple)) else ()
    return cache[project]
