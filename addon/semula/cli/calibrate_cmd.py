"""`semula calibrate`: the thresholds calibrated mode learnt from a project's review verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from semula.cli.common import data_dir_option, json_option, print_json, print_table, run_store_operation


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def _row(tier: dict[str, Any]) -> dict[str, Any]:
    threshold = tier["threshold"]
    return {
        "tier": tier["tier"],
        "stratum": tier["stratum"],
        "threshold": "—" if threshold is None else f"{threshold:.2f}",
        "approved": tier["approved"],
        "rejected": tier["rejected"],
        "above": f"{tier['approved_above']} / {tier['rejected_above']}",
        "rate": _rate(tier["estimate"]),
        "bound": _rate(tier["upper_bound"]),
        "serves": "yes" if tier["serves"] else "no",
    }


@click.command("calibrate")
@data_dir_option
@click.option("--project", default="default", show_default=True)
@click.option("--max-false-hit-rate", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=None,
              help="try another bound than the project's max_false_hit_rate setting (nothing is changed)")
@click.option("--curve", "show_curve", is_flag=True,
              help="also the curve per tier and stratum: served share and estimated error by threshold")
@json_option
def calibrate(data_dir: Path, project: str, max_false_hit_rate: float | None, show_curve: bool, as_json: bool) -> None:
    """Per near-match tier and stratum (the pair's languages: en, de, en+fr, ...): the threshold learnt
    from approvals and rejections, the verdicts behind it (in all, and `above`: approved / rejected at or
    above the threshold), the estimated false-hit `rate` with its one-sided upper `bound`, and whether
    calibrated mode would serve. A stratum serves only on its own verdicts; one without enough never does.

    Calibrated mode is opt-in: `semula config set near_serve calibrated --project P`."""
    result = run_store_operation(data_dir, "calibrate", {"project": project, "max_false_hit_rate": max_false_hit_rate,
                                                         "curve": show_curve})
    if as_json:
        return print_json(result)
    high, low, points = result["grid"]
    print_table(f"semula calibrate · project {result['project']} · bound {_rate(result['max_false_hit_rate'])} "
                f"at {result['confidence']:.0%} confidence", [_row(t) for t in result["strata"]],
                ["tier", "stratum", "threshold", "approved", "rejected", "above", "rate", "bound", "serves"])
    if not result["strata"]:
        click.echo("no verdicts yet: approve or reject near-matches with `semula review`")
    for tier in result["strata"]:
        click.echo(f"{tier['tier']} · {tier['stratum']}: {tier['reason']}")
    click.echo(f"thresholds tried: {points} from {high:.2f} down to {low:.2f}, {result['correction']} "
               f"(the bound holds for the whole search)")
    for stratum in result.get("curve", []):
        print_table(f"curve · {stratum['tier']} · {stratum['stratum']}: what each threshold would serve", [
            {"threshold": f"{p['threshold']:.2f}", "approved above": p["approved_above"],
             "rejected above": p["rejected_above"], "served share": f"{p['served_share']:.1%}",
             "bound": _rate(p["upper_bound"])} for p in stratum["points"]],
            ["threshold", "approved above", "rejected above", "served share", "bound"])
    mode = result["near_serve"]
    click.echo(f"near_serve = {mode}" + ("" if mode == "calibrated" else
                                         " (the learnt thresholds serve only with near_serve = calibrated)"))
