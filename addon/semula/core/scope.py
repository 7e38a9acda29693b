"""Answers scoped per test: the project name a test's recordings live under, apart from other tests'.

`pytest --semula-scope=test` (or the header `x-semula-scope: <name>`) keys a call's recordings to its
test, as VCR keeps a cassette per test: two tests that send the same first request each keep their own
answer and follow-up. A scope is a project of its own, named after its base project and the test
(`default.t-test-suite-py-test-one-1a2b3c4d`), so the store, the index, the review queue and the
recordings folder (`<project>/<provider>/…`) need nothing new, and the folder shows the test in its path.
A scoped project without settings of its own has its base project's (`base_project`).

Pure: names in, a name out. Changing the naming strands the recordings of every scoped test.
"""

from __future__ import annotations

import hashlib
import re
from enum import Enum

# Room left for `keyed_project`'s `.k<12 hex>` within PROJECT_NAME's 64 characters.
SCOPED_CHARS = 50
MAX_SCOPE_CHARS = 1024  # a pytest node id with long parameters stays far below this
_SLUG_DROP = re.compile(r"[^a-z0-9]+")
_SCOPED = re.compile(r"^(?P<base>.+)\.t-(?:[a-z0-9-]*-)?[0-9a-f]{8}(?P<key>\.k[0-9a-f]{12})?$")


class ScopeMode(str, Enum):
    PROJECT = "project"  # one answer per request per project (the default)
    TEST = "test"  # each test's recordings apart


def scope_problem(scope: str) -> str | None:
    """Why `scope` (a test id) cannot scope recordings, or None."""
    if len(scope) > MAX_SCOPE_CHARS:
        return f"scope name longer than {MAX_SCOPE_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in scope):
        return "scope name has control characters"
    return None


def _slug(scope: str) -> str:
    """The readable part: the test's file and name (`tests/test_a.py::test_one` → `test-a-py-test-one`)."""
    last = scope.rsplit("/", 1)[-1]
    return _SLUG_DROP.sub("-", last.lower()).strip("-")


def scoped_project(project: str, scope: str) -> str:
    """The project `scope`'s recordings live under; `project` itself when there is no scope."""
    if not scope:
        return project
    digest = hashlib.sha256(scope.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    room = SCOPED_CHARS - len(project) - len(".t-") - len(digest) - 1
    slug = _slug(scope)[:max(room, 0)].strip("-")
    name = f"{project}.t-{slug}-{digest}" if slug else f"{project}.t-{digest}"
    # A long base project: cut it, never the digest (its settings are then the defaults).
    return name if len(name) <= 64 - 14 else f"{project[:64 - 14 - 11]}.t-{digest}"


def base_project(project: str) -> str | None:
    """The project a scoped one belongs to (with the same API-key suffix), or None for an unscoped one."""
    match = _SCOPED.match(project)
    return f"{match['base']}{match['key'] or ''}" if match else None
