"""The proxy's shared parts: one typed value the hooks, the call, the recorder, the commands and Realtime read.

mitmproxy assembles an addon from small plain classes (`addons/__init__.py default_addons()`); these
are the things they have in common. `mode` and `settings` are replaced at `configure`; everything else
is made once, with the addon.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from semula.calllog.writer import ParquetLog
from semula.core.modes import Mode
from semula.core.settings import AddonSettings
from semula.providers import DEFAULT_PROVIDER_HOSTS
from semula.proxy.call.console import CallLines
from semula.proxy.call.fastpath import FastPath
from semula.proxy.run.lifecycle import Lifecycle
from semula.proxy.run.refusals import Refusals
from semula.proxy.run.runs import RunCounters
from semula.proxy.run.scopes import CurrentTests
from semula.proxy.run.storethread import StoreThread

if TYPE_CHECKING:
    from semula.proxy.run.otel import CallSpans


@dataclass(eq=False)
class ProxyParts:
    life: Lifecycle  # store thread, call and review logs, admin endpoint, refusals, current tests
    mode: Mode = Mode.AUTO
    settings: AddonSettings = field(default_factory=lambda: AddonSettings(hosts=DEFAULT_PROVIDER_HOSTS))
    # the project (proxy user name) and run tag (password) of each client connection, from its CONNECT
    conn_projects: dict[str, str] = field(default_factory=dict)
    conn_tags: dict[str, str] = field(default_factory=dict)
    # Recordings in flight, by (project, normalised or exact fp): a streamed answer reaches
    # the client before it is stored, so a repeat sent at once must wait for it.
    pending: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    runs: RunCounters = field(default_factory=RunCounters)  # semula_repeats=sequence: occurrences per run
    fast: FastPath = field(default_factory=FastPath)  # raw request → the certain-tier hit it had (`core.fasthit`)
    lines: CallLines = field(default_factory=CallLines)  # the console line per call, written once per loop turn

    @property
    def store(self) -> StoreThread:
        return self.life.store

    @property
    def refusals(self) -> Refusals:
        return self.life.refusals

    @property
    def tests(self) -> CurrentTests:
        return self.life.tests

    @property
    def calls(self) -> ParquetLog | None:
        """The call log, once running."""
        return self.life.calls

    @property
    def spans(self) -> CallSpans | None:
        """The OpenTelemetry spans' exporter, when semula_otel is on and the proxy is running."""
        return self.life.spans

    @property
    def run_id(self) -> str:
        return self.life.run_id
