"""The pytest plugin's placeholder keys step aside when the suite sets a key of its own.

A replay session exports a placeholder for each provider with no key (`session/clientenv.py`), at
the start, before the suite's fixtures run. A fixture that later sets another variable of the same
provider (GEMINI_API_KEY beside the placeholder GOOGLE_API_KEY, AWS_REGION beside the placeholder
AWS_DEFAULT_REGION) would make its client see two: google-genai logs "Both GOOGLE_API_KEY and
GEMINI_API_KEY are set", which a suite's log snapshots catch. So before every fixture and every
test the placeholders of a group the suite has filled are withdrawn, and at each test's start those
of a group that is empty again are put back. What no hook can see is a fixture or test that sets the
variable and builds its client in one go: the placeholder's name (the one google-genai reads first)
makes that case a replacement, not a second variable, for the names suites set most.

A plain class (hashable by identity: pytest and pluggy keep registered plugins in sets).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

from semula.session.clientenv import missing_placeholders, placeholder_groups, shadowed_placeholders

NAME = "semula-placeholders"


class PlaceholderGuard:
    def __init__(self, placed: Mapping[str, str]) -> None:
        self.placed = dict(placed)  # the placeholders the session set: name → value

    @classmethod
    def register(cls, config: pytest.Config, saved: Mapping[str, str | None]) -> None:
        """After the session set its environment (`saved`: the names it set): guard the placeholders among them."""
        grouped = {name for group in placeholder_groups() for name in group}
        placed = {name: os.environ[name] for name in saved if name in grouped and os.environ.get(name)}
        if placed:
            config.pluginmanager.register(cls(placed), NAME)

    def withdraw_shadowed(self) -> None:
        for name in shadowed_placeholders(self.placed, os.environ):
            os.environ.pop(name, None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        os.environ.update(missing_placeholders(self.placed, os.environ))
        self.withdraw_shadowed()

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> None:
        self.withdraw_shadowed()  # returns None: pytest's own implementation still sets the fixture up

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.withdraw_shadowed()
