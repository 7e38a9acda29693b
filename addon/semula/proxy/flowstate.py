"""What the addon knows about one intercepted provider call, between mitmproxy's hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from semula.core.canonical import CanonicalRequest
from semula.core.cascade import Outcome
from semula.core.decision import Decision
from semula.core.settings import ProjectSettings
from semula.providers.base import Adapter, Usage


@dataclass
class Served:
    """What the log reports about a recorded answer that was served."""

    upstream_ms: float | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass
class FlowState:
    host: str
    project: str
    no_cache: bool
    path: str = ""
    started_at: datetime | None = None
    adapter: Adapter | None = None
    canonical: CanonicalRequest | None = None
    settings: ProjectSettings = field(default_factory=ProjectSettings)
    outcome: Outcome | None = None  # the cascade's decision and fingerprints
    decision_ms: float | None = None
    upstream_started: float | None = None
    streamed: bool = False
    chunks: list[bytes] = field(default_factory=list)
    served: Served = field(default_factory=Served)
    error: str | None = None
    cut: bool = False  # the answer broke off: the client did not get it whole
    pending_key: tuple[str, str] | None = None
    run: str = ""  # the x-semula-run header: the run whose repeats are counted (sequence mode)
    tag: str = ""  # the proxy password's run tag (proxy/refusals.py)

    @property
    def decision(self) -> Decision | None:
        return self.outcome.decision if self.outcome else None

    @property
    def request_fp(self) -> str | None:
        return self.outcome.request_fp if self.outcome else None

    @property
    def normalised_fp(self) -> str | None:
        return self.outcome.normalised_fp if self.outcome else None
