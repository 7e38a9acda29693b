"""`semula drift`: re-send recorded requests to the live provider and report what changed."""

from __future__ import annotations

import json
import os
import ssl
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from semula.cli.common import console, print_table

DEFAULT_MAX_CALLS = 20
DEFAULT_MAX_TOKENS = 100_000


@click.command("drift")
@click.option("--recordings", "folder", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="the recordings folder [default: ./semula-recordings, or $SEMULA_RECORDINGS]")
@click.option("--project", default=None, help="only this project's recordings")
@click.option("--path", "path_glob", default=None, metavar="GLOB",
              help="only files matching this glob, relative to the folder (e.g. 'default/openai/*')")
@click.option("--max-age", default=None, metavar="AGE", help="only recordings older than this (30d, 12h, 2w)")
@click.option("--sample", type=click.IntRange(min=1), default=None, help="a random sample of N recordings")
@click.option("--seed", type=int, default=0, show_default=True, help="the sample's seed")
@click.option("--max-calls", type=click.IntRange(min=0), default=DEFAULT_MAX_CALLS, show_default=True,
              help="a hard limit on the calls made")
@click.option("--max-tokens", type=click.IntRange(min=0), default=DEFAULT_MAX_TOKENS, show_default=True,
              help="stop once the recordings (then the live answers) count this many tokens")
@click.option("--min-similarity", type=click.FloatRange(0, 1), default=0.6, show_default=True,
              help="an answer text less similar than this to the recorded one counts as drifted")
@click.option("--update", is_flag=True, help="re-record the drifted recordings in place (same files)")
@click.option("--json", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the full report (shape changes, diffs) to this JSON file")
@click.option("--base-url", default=None, help="send to this base URL instead of the recording's host (a gateway)")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST",
              help="also re-send the generic recordings of this host (one you added with --extra-host), with no "
                   "API key; provider recordings go only to their provider's own hosts")
@click.option("--header", "headers", multiple=True, metavar="NAME:VALUE",
              help="a header added to every model call (never sent to an MCP server)")
@click.option("--mcp-server", "mcp_servers", multiple=True, metavar="HOST[:PORT][/PATH]",
              help="re-send the MCP recordings of this server (the proxy's --mcp-server entry; no port: 443, "
                   "https; http://HOST:PORT for plain HTTP); an MCP recording of any other server is not sent")
@click.option("--mcp-header", "mcp_headers", multiple=True, metavar="NAME:VALUE",
              help="a header (credentials) sent to every --mcp-server; $SEMULA_MCP_TOKEN is sent as "
                   "'Authorization: Bearer' when set")
@click.option("--proxy", default=None, help="send through this HTTP proxy")
@click.option("--ca-bundle", type=click.Path(exists=True, dir_okay=False), default=None,
              help="trust this CA file (a gateway's, a test server's)")
@click.option("--fail", is_flag=True, help="exit 1 when a recording drifted (a CI gate)")
def drift(folder: Path | None, project: str | None, path_glob: str | None, max_age: str | None, sample: int | None,
          seed: int, max_calls: int, max_tokens: int, min_similarity: float, update: bool, report_path: Path | None,
          base_url: str | None, allow_hosts: tuple[str, ...], headers: tuple[str, ...], mcp_servers: tuple[str, ...],
          mcp_headers: tuple[str, ...], proxy: str | None, ca_bundle: str | None, fail: bool) -> None:
    """Re-send recorded requests to the live provider and report what changed (status, JSON shape by path,
    stream events, usage, answer text). Never changes a recording unless --update."""
    import httpx

    from semula.cli.recordings_cmd import default_recordings
    from semula.drift import mcpcheck, mcpsend, run, select
    from semula.drift.send import NotSent, allowed, has_key, key_problem, target_of
    from semula.providers.mcp import NAME as MCP_NAME

    if os.environ.get("SEMULA_MODE", "").strip().lower() == "replay":
        raise click.ClickException("SEMULA_MODE=replay: drift calls the live API, it never runs in replay mode")
    root = (folder or default_recordings()).expanduser().resolve()
    if not root.is_dir():
        raise click.ClickException(f"no recordings folder at {root}")
    try:
        older_than = select.parse_age(max_age) if max_age else None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--max-age") from None
    extra = tuple(_header(h) for h in headers)
    try:
        servers = mcpsend.registered(mcp_servers)
    except ValueError as e:
        raise click.BadParameter(str(e).removeprefix("semula_mcp_servers: "), param_hint="--mcp-server") from None
    mcp = mcpcheck.McpOptions(servers, mcpcheck.credentials_of(os.environ, tuple(_header(h) for h in mcp_headers)))
    now = datetime.now(UTC).replace(tzinfo=None)
    items, bad = select.recordings_in(root)
    scoped = select.in_scope(items, project=project, path_glob=path_glob, older_than=older_than, now=now,
                             sample=sample, seed=seed)
    sent, left_out = select.capped(scoped, max_calls, max_tokens)
    allow = allowed(allow_hosts)
    sendable = []
    for item in sent:
        try:
            sendable.append((item, target_of(item.recording, allow)))
        except NotSent:
            pass  # its row says why
    keyed = [s for s, target in sendable if not target.keyed or has_key(s.recording.provider)]
    mcp_calls = [s for s in sent if s.recording.provider == MCP_NAME]
    click.echo(f"drift: {len(scoped)} recording(s) in scope in {root}; sending at most {len(sent)} call(s) "
               f"(--max-calls {max_calls}), about {sum(s.tokens for s in sent)} recorded tokens "
               f"(--max-tokens {max_tokens}){'; --update re-records drifted ones in place' if update else ''}")
    if mcp_calls:
        click.echo(f"drift: {len(mcp_calls)} MCP recording(s) go only to the --mcp-server entries "
                   f"({', '.join(map(str, servers)) or 'none named: none is sent'}), one session per server; "
                   f"{'credentials given' if mcp.headers else 'no credentials sent'}")
    if sendable and not keyed and not mcp_calls:
        providers = sorted({s.recording.provider for s, _ in sendable})
        problems = "; ".join(p for p in map(key_problem, providers) if p)
        raise click.ClickException(f"no real API key: {problems}; set the key the provider's SDK reads")
    options = run.DriftOptions(base_url=base_url, allow_hosts=allow, extra_headers=extra, max_tokens=max_tokens,
                               min_similarity=min_similarity, update=update, mcp=mcp)
    verify = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
    with httpx.Client(proxy=proxy, verify=verify, trust_env=False, timeout=120) as client:
        rows = run.check_all(root, sent, client, options, now, os.environ)
    rows += [run.Row(s.rel, s.recording.provider, "skipped", f"over --max-calls {max_calls} or --max-tokens")
             for s in left_out]
    _print(rows)
    for rel, problem in bad:
        click.echo(f"{root / rel}: not loadable, not checked: {problem}", err=True)
    if report_path is not None:
        report = {"folder": str(root), "at": now.isoformat(), "max_calls": max_calls, "max_tokens": max_tokens,
                  "rows": [r.to_json() for r in rows], "call_log": "not written (drift rows are not proxy calls)"}
        report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if fail and any(r.outcome in ("drifted", "updated") for r in rows):
        sys.exit(1)


def _header(value: str) -> tuple[str, str]:
    name, sep, header_value = value.partition(":")
    if not sep or not name.strip():
        raise click.BadParameter(f"{value!r} is not NAME:VALUE", param_hint="--header")
    return name.strip().lower(), header_value.strip()


def _print(rows: list[Any]) -> None:
    table_rows = [{"file": row.rel, "reason": row.reason, **_cells(row.drift),
                   "verdict": row.outcome if row.drift is None else f"{row.outcome} ({row.drift.severity})"}
                  for row in rows]
    print_table(f"drift: {sum(r.outcome in ('drifted', 'updated') for r in rows)} of {len(rows)} drifted",
                table_rows, ["file", "verdict", "status", "shape", "events", "usage", "text", "reason"])
    worst = sorted((r for r in rows if r.drift is not None and r.drift.drifted),
                   key=lambda r: (r.drift.severity != "breaking", r.drift.similarity))
    for row in worst[:5]:  # what drifted most, with its changes and diff
        console.print(f"[bold]{row.rel}[/bold]", highlight=False)
        for change in row.drift.shape[:10]:
            console.print(f"  {change.severity:8} {change.change:7} {change.path}  "
                          f"{change.old or ''} → {change.new or ''}", highlight=False, markup=False)
        for line in row.drift.diff:
            console.print(f"  {line}", highlight=False, markup=False)


def _cells(d: Any) -> dict[str, str]:
    if d is None:
        return {}
    old, new = d.status
    return {"status": f"{old} → {new}" if old != new else str(old),
            "shape": _shape_cell(d),
            "events": " ".join([f"+{e}" for e in d.events_added] + [f"-{e}" for e in d.events_removed]),
            "usage": f"{_usage(d.usage[0])} → {_usage(d.usage[1])}", "text": f"{d.similarity:.2f}"}


def _shape_cell(d: Any) -> str:
    breaking = sum(1 for c in d.shape if c.severity == "breaking")
    minor = len(d.shape) - breaking
    return ", ".join(p for p in (f"{breaking} breaking" if breaking else "", f"{minor} minor" if minor else "") if p)


def _usage(pair: Any) -> str:
    return "/".join("?" if n is None else str(n) for n in pair)
