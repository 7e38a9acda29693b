"""`semula entries`, `semula config` and `semula stats`: look at and change what is stored."""

from __future__ import annotations

import json
from pathlib import Path

import click

from semula.cli.common import console, data_dir_option, json_option, print_json, print_table, run_store_operation
from semula.core.settings import SETTING_HELP, SETTING_KEYS, ProjectSettings, settings_to_json


@click.group()
def entries() -> None:
    """List, show and delete recordings."""


@entries.command("list")
@data_dir_option
@click.option("--project", default=None, help="only this project")
@click.option("--limit", type=int, default=100, show_default=True)
@json_option
def entries_list(data_dir: Path, project: str | None, limit: int, as_json: bool) -> None:
    """List recordings, newest first."""
    rows = run_store_operation(data_dir, "entries.list", {"project": project, "limit": limit})
    if as_json:
        return print_json(rows)
    print_table(f"recordings in {data_dir}", rows,
                ["id", "project", "provider", "model", "endpoint", "streamed", "size", "created_at", "last_text"])


@entries.command("show")
@click.argument("entry_id", type=int)
@data_dir_option
@json_option
def entries_show(entry_id: int, data_dir: Path, as_json: bool) -> None:
    """Show one recording: its request and recorded answer."""
    entry = run_store_operation(data_dir, "entries.show", {"id": entry_id})
    if entry is None:
        raise click.ClickException(f"no entry #{entry_id} in {data_dir}")
    if as_json:
        return print_json(entry)
    for key, value in entry.items():
        if key in ("request", "response", "headers"):
            continue
        console.print(f"[bold]{key}[/bold]: {value}")
    console.print("[bold]request[/bold]:")
    console.print_json(json.dumps(entry["request"]))
    console.print("[bold]response[/bold]:")
    click.echo(entry["response"])


@entries.command("delete")
@click.argument("entry_id", type=int)
@data_dir_option
def entries_delete(entry_id: int, data_dir: Path) -> None:
    """Delete one recording (and its file in the recordings folder)."""
    if not run_store_operation(data_dir, "entries.delete", {"id": entry_id}):
        raise click.ClickException(f"no entry #{entry_id} in {data_dir}")
    click.echo(f"deleted entry #{entry_id}")


@click.group()
def config() -> None:
    """Show and change per-project settings."""


@config.command("show")
@data_dir_option
@click.option("--project", default="default", show_default=True)
@json_option
def config_show(data_dir: Path, project: str, as_json: bool) -> None:
    """Show a project's settings (defaults included)."""
    values = run_store_operation(data_dir, "config.show", {"project": project})
    if as_json:
        return print_json(values)
    print_table(f"settings of project {project}", [{"key": k, "value": json.dumps(v)} for k, v in values.items()],
                ["key", "value"])


def _settings_epilog() -> str:
    """The keys and what each does, from `ProjectSettings` itself (\b keeps click from rewrapping)."""
    width = max(map(len, SETTING_KEYS))
    defaults = settings_to_json(ProjectSettings())
    return "\b\nSettings (default):\n" + "\n".join(
        f"  {key.ljust(width)}  {SETTING_HELP[key]} ({json.dumps(defaults[key])})" for key in SETTING_KEYS)


@config.command("set", epilog=_settings_epilog())
@click.argument("key")
@click.argument("value")
@data_dir_option
@click.option("--project", default="default", show_default=True)
def config_set(key: str, value: str, data_dir: Path, project: str) -> None:
    """Set a project's setting KEY to VALUE (JSON, or a plain string; lists as JSON or comma-separated)."""
    if key not in SETTING_KEYS:
        raise click.ClickException(f"unknown setting {key!r}; valid settings: {', '.join(SETTING_KEYS)}")
    result = run_store_operation(data_dir, "config.set", {"project": project, "key": key, "value": value})
    note = f" (re-fingerprinted {result['refingerprinted']} recordings)" if result.get("refingerprinted") else ""
    click.echo(f"{project}: {key} = {json.dumps(result['value'])}{note}")


@click.command()
@data_dir_option
@click.option("--project", default=None)
@json_option
def stats(data_dir: Path, project: str | None, as_json: bool) -> None:
    """Counts by decision and tier, and the hit rate per mode, from the Parquet call log.

    Hit rate = hits ÷ lookups; a lookup is a hit, miss or error outside record mode (bypasses and
    passthroughs never asked the cache). The report and the notebooks use the same definition."""
    import duckdb

    from semula.calllog.reader import hit_rates, load_log
    from semula.calllog.schema import CALL_LOG_SCHEMA

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    if not load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA):
        if as_json:
            return print_json({"calls": 0, "lookups": 0, "hits": 0, "hit_rate": None, "by_mode": [],
                               "by_decision_tier": []})
        click.echo(f"no calls logged yet in {data_dir / 'calls'}")
        return
    where, params = ("WHERE project = ?", [project]) if project else ("", [])
    rows = con.execute(
        f"""SELECT decision, tier, count(*) AS calls, round(median(decision_ms), 3) AS decision_ms_p50,
                   sum(CASE WHEN recorded THEN 1 ELSE 0 END) AS recorded
            FROM calls {where} GROUP BY ALL ORDER BY calls DESC""", params,
    ).fetchall()
    out = [dict(zip(["decision", "tier", "calls", "decision_ms_p50", "recorded"], r)) for r in rows]
    overall = hit_rates(con, by=None, project=project)[0]
    by_mode = hit_rates(con, by="mode", project=project)
    if as_json:
        return print_json({**overall, "by_mode": by_mode, "by_decision_tier": out})
    print_table(f"calls in {data_dir / 'calls'}" + (f" (project {project})" if project else ""), out,
                ["decision", "tier", "calls", "recorded", "decision_ms_p50"])
    print_table("hit rate per mode (hits ÷ lookups)", [{**r, "hit_rate": _rate(r["hit_rate"])} for r in by_mode],
                ["mode", "calls", "lookups", "hits", "hit_rate"])
    click.echo(f"{overall['calls']} calls, hit rate {_rate(overall['hit_rate'])} ({overall['hits']} hits of "
               f"{overall['lookups']} lookups; bypass, passthrough and record-mode calls are not lookups)")


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"
