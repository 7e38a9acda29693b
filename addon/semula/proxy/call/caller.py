"""Who a flow is for: its project, API-key tag, test and no-cache switch.

Read from the CONNECT's proxy user (noted per client connection), the control headers and the
test scopes; the control headers are stripped here, before the call goes on, so they never reach a
provider. The HTTP hooks (`addon.py`) and the Realtime upgrade (`realtime/hooks.py`) both ask this.
"""

from __future__ import annotations

from dataclasses import dataclass

from mitmproxy import http

from semula.core.bypass import NO_CACHE_HEADER
from semula.core.scope import scoped_project
from semula.proxy.call.identity import proxy_credentials
from semula.proxy.run.refusals import tag_of
from semula.proxy.run.runs import RUN_HEADER
from semula.proxy.run.scopes import SCOPE_HEADER, CurrentTests, FlowTest

PROJECT_HEADER = "x-semula-project"
# The headers semula reads and strips before the call goes on (as raw lower-case names).
CONTROL_HEADERS = frozenset(n.encode() for n in ("proxy-authorization", PROJECT_HEADER, NO_CACHE_HEADER, RUN_HEADER,
                                                  SCOPE_HEADER))


@dataclass(frozen=True)
class Caller:
    project: str  # scoped to its test when the session scopes per test
    tag: str
    test: FlowTest
    no_cache: bool


def caller_of(flow: http.HTTPFlow, conn_projects: dict[str, str], conn_tags: dict[str, str], tests: CurrentTests,
              default_project: str) -> Caller:
    headers = flow.request.headers
    user = header_project = password = None
    no_cache, run, scope = False, "", ""
    if any(name.lower() in CONTROL_HEADERS for name, _ in headers.fields):  # one pass: usually none
        # plain-HTTP proxying sends Proxy-Authorization per request
        user, password = proxy_credentials(headers.get("proxy-authorization"))
        header_project = headers.get(PROJECT_HEADER)
        no_cache = NO_CACHE_HEADER in headers
        run, scope = headers.get(RUN_HEADER, ""), headers.get(SCOPE_HEADER, "")
        for name in ("proxy-authorization", PROJECT_HEADER, NO_CACHE_HEADER, RUN_HEADER, SCOPE_HEADER):
            if name in headers:
                del headers[name]
    project = conn_projects.get(flow.client_conn.id) or user or header_project or default_project
    tag = conn_tags.get(flow.client_conn.id) or tag_of(password)
    test = tests.for_flow(tag, scope, run)  # its test: scopes recordings, repeats and refusals
    return Caller(scoped_project(project, test.scope), tag, test, no_cache)
