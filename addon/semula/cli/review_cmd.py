"""`semula review list|show|approve|reject|web`: the human side of the near-match tiers."""

from __future__ import annotations

from pathlib import Path

import click

from semula.cli.common import (console, data_dir_option, json_option, print_json, print_table, run_store_operation,
                               store_operations)


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
    """List review candidates (open ones unless --status says otherwise)."""
    rows = run_store_operation(data_dir, "review.list", {"project": project, "status": status})
    if as_json:
        return print_json(rows)
    if not rows:
        click.echo(f"no {status if status != 'all' else ''} review candidates".replace("  ", " "))
        return
    columns = ["id", "project", "tier", "score", "guard_reason", "entry_id", "request", "recorded"]
    print_table(f"review candidates ({status})", rows, columns if status != "all" else ["id", "status", *columns[1:]])


@review.command("show")
@click.argument("candidate_id", type=int)
@data_dir_option
@json_option
def review_show(candidate_id: int, data_dir: Path, as_json: bool) -> None:
    """Show one candidate: the word diff against its recording and the recorded answer."""
    row = run_store_operation(data_dir, "review.show", {"id": candidate_id})
    if as_json:
        return print_json(row)
    console.print(f"[bold]candidate #{row['id']}[/bold] · project {row['project']} · {row['tier']} "
                  f"score {row['score']:.3f} · recording #{row['entry_id']} · {row['status']}")
    console.print(f"guard: {row['guard_reason'] or 'pass'} · not served because: {row['reason']}", highlight=False)
    click.echo(f"this request: {_shape(row['request_shape'])}")
    click.echo(f"recording:    {_shape(row['recorded_shape'])}")
    if row.get("shape_differs"):
        click.echo(f"shapes differ ({row['shape_differs']}): this pairing can never be served")
    if row.get("own_recordings"):
        own = ", ".join(f"#{i}" for i in row["own_recordings"])
        click.echo(f"this request has its own recording {own}: approving is refused (it would never be served)")
    console.print("[bold]diff[/bold] ([red][-recorded-][/red] [green]{+this request+}[/green]):", highlight=False)
    click.echo(row["diff"])
    what = "recorded answer" if row.get("answer_format") == "text" else "recorded answer (no text in it: the body)"
    console.print(f"[bold]{what}[/bold]:")
    click.echo(row["answer"])


def _shape(shape: dict | None) -> str:
    if not shape:
        return "(the recording was deleted)"
    stream = "stream" if shape["stream"] else "non-stream"
    return f"{shape['provider']} · {shape['method']} {shape['endpoint']} · model {shape['model']} · {stream}"


@review.command("approve")
@click.argument("candidate_id", type=int, required=False)
@click.option("--request", "request_fp", default=None,
              help="the request's fingerprint (from a replay-miss message): works on any machine")
@click.option("--recording", "recording_fp", default=None, help="the candidate recording's fingerprint")
@data_dir_option
def review_approve(candidate_id: int | None, request_fp: str | None, recording_fp: str | None, data_dir: Path) -> None:
    """Approve a candidate: its request is served the recorded answer from now on (tier alias).

    Never deletes a recording: when the request has a recording of its own (auto or record mode
    stored its answer), approval is refused and its candidates are closed, because that recording
    answers first and the alias would never be served.

    By id (`semula review approve 7`), or by the two fingerprints a replay-miss message prints,
    which are the same in every store: `--request fp2:… --recording fp2:…`."""
    if candidate_id is None and not (request_fp and recording_fp):
        raise click.UsageError("give a CANDIDATE_ID, or both --request and --recording")
    params = {"id": candidate_id} if candidate_id is not None else {"request": request_fp, "recording": recording_fp}
    result = run_store_operation(data_dir, "review.approve", params)
    candidate_id = result["id"]
    closed = f"; closed the request's other candidate(s) {', '.join(f'#{i}' for i in result['closed'])}" \
        if result["closed"] else ""
    click.echo(f"approved #{candidate_id}: the request is now served recording #{result['alias_to']} (tier alias)"
               f"{closed}; no recording was deleted")


@review.command("reject")
@click.argument("candidate_id", type=int)
@data_dir_option
def review_reject(candidate_id: int, data_dir: Path) -> None:
    """Reject a candidate: that pairing is never queued or served again."""
    run_store_operation(data_dir, "review.reject", {"id": candidate_id})
    click.echo(f"rejected #{candidate_id}: this pairing will never be queued or served again")


@review.command("web")
@data_dir_option
@click.option("--project", default=None, help="show this project's candidates first (the page's filter can change it)")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default="a free port")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="the address to listen on; anything but loopback lets other machines try the token")
@click.option("--no-open", is_flag=True, help="print the URL only; don't open a browser")
def review_web(data_dir: Path, project: str | None, port: int, host: str, no_open: bool) -> None:
    """Review in the browser: both requests side by side, changes highlighted, approve/reject (keys a, r, j, k).

    The URL carries this run's token after `#`: the page keeps it in its own tab and never sends it
    anywhere but as a header to this server. Printed once, here, for you to open."""
    import signal
    import webbrowser

    from semula.review_web.launch import LaunchPage
    from semula.review_web.server import ReviewWeb
    from semula.session.signals import STOP_SIGNALS, Stopped, StopSignals

    try:
        web = ReviewWeb(lambda: store_operations(data_dir), host, port, default_project=project,
                        log=lambda line: click.echo(line, err=True))
    except OSError as e:
        raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    if not web.loopback:
        click.echo(f"warning: listening on {host}, not loopback: anyone who can reach it and learns the URL "
                   "can approve", err=True)
    click.echo(f"semula review web: {web.url}  (Ctrl-C to stop)", err=False)
    # Ctrl-C, SIGTERM and SIGHUP all clean up; a second signal while cleaning up is held, never raised
    stop = StopSignals(lambda signo: KeyboardInterrupt() if signo == signal.SIGINT else Stopped(signo),
                       (signal.SIGINT, *STOP_SIGNALS)).install()
    launcher = None
    try:
        if not no_open:
            launcher = LaunchPage(web.url)
            web.on_first_use = launcher.remove  # the page has the token now: the file has done its job
            webbrowser.open(launcher.page.as_uri())
        web.serve_forever()
    except (KeyboardInterrupt, Stopped):
        pass
    finally:
        stop.hold()
        web.close()
        if launcher is not None:
            launcher.remove()
        stop.restore()
    if stop.received not in (None, signal.SIGINT):
        raise SystemExit(stop.exit_code)
