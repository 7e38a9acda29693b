"""`semula.proxy.run.lean`: in a fresh interpreter (this one's modules stay as they are), mitmproxy's addons
import without Flask and without running ldap3; each loads as usual once used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters: what a new process imports: the whole suite runs it, --quick does not


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_mitmproxys_addons_import_without_flask_or_ldap3_and_both_load_when_used(tmp_path: Path) -> None:
    (tmp_path / "mitmproxy-ca-cert.pem").write_text("-----BEGIN CERTIFICATE-----\nfake\n")
    out = run(f"""
        import sys
        from semula.proxy.run import lean
        lean.install()
        lean.install()  # once is enough: a second call adds no second finder
        assert sum(type(f).__name__ == "_Lean" for f in sys.meta_path) == 1
        import mitmproxy.addons
        from mitmproxy.addons import onboarding
        assert "flask" not in sys.modules and "jinja2" not in sys.modules
        assert type(sys.modules["ldap3"]).__name__ == "_LazyModule"
        onboarding.Onboarding()  # mitmproxy's own addon takes the stand-in
        app = sys.modules["mitmproxy.addons.onboardingapp"].app
        app.config["CONFDIR"] = {str(tmp_path)!r}  # as the addon's configure sets it, before the app is built
        from werkzeug.test import Client
        page = Client(app).get("/cert/pem")
        print(page.status_code, page.data.decode().splitlines()[1])
        print(len(Client(app).get("/").data) > 1000, "flask" in sys.modules)
        import ldap3
        print(ldap3.Server.__name__)
        from mitmproxy.addons.onboardingapp import read_cert  # any other name loads the real module
        print(read_cert.__name__)
    """)
    assert out.split("\n")[:4] == ["200 fake", "True True", "Server", "read_cert"], out


def test_the_ca_key_loads_and_is_checked_once_per_file_content(tmp_path: Path) -> None:
    out = run(f"""
        from mitmproxy import certs
        from semula.proxy.run import lean
        lean.remember_ca_key()
        lean.remember_ca_key()  # a second call does not wrap the wrapper
        assert certs.load_pem_private_key.remembers
        first = certs.CertStore.from_store({str(tmp_path)!r}, "mitmproxy", 2048)
        second = certs.CertStore.from_store({str(tmp_path)!r}, "mitmproxy", 2048)
        print(first.default_privatekey is second.default_privatekey)
        other = certs.CertStore.from_store({str(tmp_path / "other")!r}, "mitmproxy", 2048)
        print(other.default_privatekey is first.default_privatekey)
        try:
            certs.load_pem_private_key(b"-----BEGIN PRIVATE KEY-----\\nbad\\n-----END PRIVATE KEY-----\\n", None)
        except ValueError:
            print("bad key refused")
    """)
    assert out.split("\n")[:3] == ["True", "False", "bad key refused"]


def test_mitmproxys_messages_are_built_without_the_debug_type_check() -> None:
    out = run("""
        from mitmproxy import http
        from mitmproxy.utils import typecheck
        from semula.proxy.run import lean
        try:
            http.Response(b"HTTP/1.1", 200, b"OK", http.Headers(), b"", None, "yesterday", None)
        except (TypeError, ValueError) as e:
            print("checked")
        lean.unchecked_messages()
        lean.unchecked_messages()  # once is enough
        calls = []
        real = typecheck.check_option_type
        typecheck.check_option_type = lambda *a: calls.append(a) or real(*a)
        response = http.Response.make(200, b"answer", {"content-type": "application/json"})
        request = http.Request.make("POST", "https://api.openai.com/v1/chat/completions", b"{}")
        print(response.content, request.host, len(calls))
    """)
    assert out.split() == ["checked", "b'answer'", "api.openai.com", "0"]


def test_quick_dispatch_calls_the_same_handlers_in_the_same_order() -> None:
    out = run("""
        import asyncio
        from mitmproxy import exceptions
        from mitmproxy.proxy.layers.http import HttpRequestHook
        from mitmproxy.test import taddons, tflow
        from semula.proxy.run import lean

        calls = []

        class Named:
            def __init__(self, name, halt=False, fail=False, children=()):
                self.name, self.halt, self.fail = name, halt, fail
                if children:
                    self.addons = list(children)

        class Handles(Named):
            def request(self, flow):
                calls.append(self.name)
                if self.fail:
                    raise ValueError("boom")
                if self.halt:
                    raise exceptions.AddonHalt()

        class AsyncHandles(Named):
            async def request(self, flow):
                calls.append(self.name)

        class Parent(Named):
            pass

        async def main():
            results = []
            for quick in (False, True):
                if quick:
                    lean.quick_dispatch()
                    lean.quick_dispatch()  # once is enough
                with taddons.context() as tctx:
                    for addon in [Named("silent"), Handles("a"), Parent("p", children=[Named("c1"), AsyncHandles("c2")]),
                                  Handles("fails", fail=True), AsyncHandles("b"), Handles("halts", halt=True), Handles("after")]:
                        tctx.master.addons.add(addon)
                    calls.clear()
                    await tctx.master.addons.handle_lifecycle(HttpRequestHook(tflow.tflow()))
                    results.append(list(calls))
            quick = type(tctx.master.addons).trigger_event
            print(results[0] == results[1], ",".join(results[1]), getattr(quick, "quick", False))

        asyncio.run(main())
    """)
    assert out.split() == ["True", "a,c2,fails,b,halts", "True"]
