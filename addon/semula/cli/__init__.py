"""The `semula` command line: one small module per topic, gathered in one click group."""

from __future__ import annotations

import click

from semula.cli.calibrate_cmd import calibrate
from semula.cli.embeddings_cmd import embeddings
from semula.cli.eval_cmd import eval_command
from semula.cli.exec_cmd import exec_command
from semula.cli.proxy_cmd import env, proxy
from semula.cli.drift_cmd import drift
from semula.cli.import_cmd import import_command
from semula.cli.recordings_cmd import export_command, recordings
from semula.cli.review_cmd import review
from semula.cli.store_cmds import config, entries, stats


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="semula")
def main() -> None:
    """semula — record and replay LLM API calls through mitmproxy."""


for command in (proxy, env, exec_command, entries, config, stats, review, eval_command, embeddings, recordings,
                export_command, import_command, drift, calibrate):
    main.add_command(command)

try:  # the report needs the `analysis` extra; without it the other commands still work
    from semula.cli.report_cmd import report

    main.add_command(report)
except ImportError:  # pragma: no cover
    pass
