"""`semula review list|show|approve|reject`: the human side of the near-match tiers."""

from __future__ import annotations

from pathlib import Path

import click

from semula.cli.common import console, data_dir_option, json_option, print_json, print_table, run_store_operation


@click.group()
def review() -> None:
    """Near-matches waiting for a person: approve (serve it as an alias) or reject (never again)."""


@review.command("list")
@data_dir_option
@click.option("--project", default=None)
@click.option("--status", type=click.Choice(["open", "approved", "rejected", "closed", "all"]), default="open",
              show_default=True)
@json_option
def review_list(data_dir: Path, project: str | None, status: str, as_json: bool) -> None:
    rows = run_store_operation(data_dir, "review.list", {"project": project, "status": status})
    if as_json:
        return print_json(rows)
    if not rows:
        click.echo(f"no {status if status != 'all' else ''} review candidates".replace("  ", " "))
        return
    print_table(f"review candidates ({status})", rows,
                ["id", "project", "tier", "score", "guard_reason", "entry_id", "request", "recorded"])


@review.command("show")
@click.argument("candidate_id", type=int)
@data_dir_option
@json_option
def review_show(candidate_id: int, data_dir: Path, as_json: bool) -> None:
    row = run_store_operation(data_dir, "review.show", {"id": candidate_id})
    if as_json:
        return print_json(row)
    console.print(f"[bold]candidate #{row['id']}[/bold] · project {row['project']} · {row['tier']} "
                  f"score {row['score']:.3f} · recording #{row['entry_id']} · {row['status']}")
    console.print(f"guard: {row['guard_reason'] or 'pass'} · not served because: {row['reason']}")
    console.print("[bold]diff[/bold] ([red][-recorded-][/red] [green]{+this request+}[/green]):", highlight=False)
    click.echo(row["diff"])
    console.print("[bold]recorded answer[/bold]:")
    click.echo(row["answer"])


@review.command("approve")
@click.argument("candidate_id", type=int)
@data_dir_option
def review_approve(candidate_id: int, data_dir: Path) -> None:
    result = run_store_operation(data_dir, "review.approve", {"id": candidate_id})
    note = f"; replaced the request's own recording(s) {result['replaced_recordings']}" if result["replaced_recordings"] else ""
    click.echo(f"approved #{candidate_id}: the request is now served recording #{result['alias_to']} (tier alias){note}")


@review.command("reject")
@click.argument("candidate_id", type=int)
@data_dir_option
def review_reject(candidate_id: int, data_dir: Path) -> None:
    run_store_operation(data_dir, "review.reject", {"id": candidate_id})
    click.echo(f"rejected #{candidate_id}: this pairing will never be queued or served again")
