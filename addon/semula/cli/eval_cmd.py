"""`semula eval PAIRS.jsonl`: measure the matching pipeline on labelled request pairs."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.progress import Progress

from semula.cli.common import console, json_option, print_json, print_table


@click.command("eval")
@click.argument("pairs", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a project setting for the run")
@click.option("--pairs-out", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="write one JSON line per pair: id, category, expect, outcome, tier, score, reason, guard_reason "
                   "(and ignored: the semula_ignore rules that changed its fingerprints)")
@click.option("--store", metavar="URL", default=None,
              help="run against a Postgres server (postgresql://…), in a throwaway schema [default: a temporary DuckDB file]")
@json_option
def eval_command(pairs: Path, sets: tuple[str, ...], pairs_out: Path | None, as_json: bool, store: str | None) -> None:
    """Record each pair's `stored` side, decide on `incoming`, and report hit and false-hit rates."""
    from semula.engine.evaluate import evaluate
    from semula.core.settings import SettingsError, parse_setting
    from semula.store.types import StoreError

    overrides = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        try:
            parse_setting(key, value)
        except SettingsError as e:
            raise click.BadParameter(str(e), param_hint="--set") from None
        overrides[key] = value
    out = open(pairs_out, "w", encoding="utf-8") if pairs_out else None  # noqa: SIM115 - closed below
    write = (lambda line: out.write(json.dumps(line, ensure_ascii=False) + "\n")) if out else None
    try:
        if as_json:
            result = evaluate(pairs, overrides, pairs_out=write, store=store)
        else:
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("evaluating", total=None)
                result = evaluate(pairs, overrides, lambda done, total: progress.update(task, completed=done, total=total),
                                  pairs_out=write, store=store)
    except (ValueError, StoreError) as e:
        raise click.ClickException(str(e)) from None
    finally:
        if out:
            out.close()
    if as_json:
        return print_json(result)
    rows = [{"category": k, **v, "served_by_tier": ", ".join(f"{t} {n}" for t, n in v["served_by_tier"].items())}
            for k, v in result["by_category"].items()]
    print_table(f"semula eval {pairs.name}", rows, ["category", "n", "served", "review", "miss", "served_by_tier"])
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    click.echo(f"pairs {result['pairs']} · hit_rate {fmt(result['hit_rate'])} · false_hit_rate "
               f"{fmt(result['false_hit_rate'])} · review_recall {fmt(result['review_recall'])}")
    if ignore := result.get("ignore"):
        click.echo(f"ignored by semula_ignore: {', '.join(ignore['rules'])} · changed the fingerprints of "
                   f"{ignore['pairs_affected']} of {result['pairs']} pairs (every other field counts)")
    for scope, r in result["by_id_parity"].items():
        click.echo(f"  {scope}: hit_rate {fmt(r['hit_rate'])} · false_hit_rate {fmt(r['false_hit_rate'])} · "
                   f"review_recall {fmt(r['review_recall'])}")
