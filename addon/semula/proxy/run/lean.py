"""What the proxy's process leaves unloaded until it is used: mitmproxy imports every addon's dependencies
before it listens, two of them for features semula's proxy rarely or never uses.

- ldap3 (~50 ms), for the `proxyauth` addon's LDAP mode: loaded lazily (`importlib.util.LazyLoader`), at its
  first attribute.
- Flask, Jinja and the rest of the onboarding app (~50 ms beyond werkzeug, which `maplocal` needs anyway),
  for the page at http://mitm.it: its module is given an `app` that builds mitmproxy's own Flask app on the
  first request for that page. Every other name of the module loads it as it would have.

And what it does twice: mitmproxy loads its CA's private key at `configure` and again when `running`,
each time with the RSA key's consistency checks (~37 ms of CPU for a 2048-bit key, some 6 % of a start):
`remember_ca_key` hands the second load of the same bytes the key the first one checked.

And what it does for every request and response it builds: unless Python runs with -O, mitmproxy checks
the type of each field of their data (`MessageData.__post_init__`, under `__debug__`), ~6 % of the CPU
of a replayed hit (the no-op addon's too, py-spy). `unchecked_messages` leaves the check out: semula
builds its answers from typed values (mypy checks them), and mitmproxy builds the rest from the wire.
And each event of a flow (its request, response, and an `update` after each) goes to every addon in
the chain, ~45 of them, each through a context manager, a coroutine and a generator, though only a few
handle it: `quick_dispatch` skips, before any of that, the addons that would have found no handler.

A mitmproxy whose modules look otherwise than expected gets them loaded as usual: `install` only ever
makes start-up slower by nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

ONBOARDING = "mitmproxy.addons.onboardingapp"
LAZY = frozenset({"ldap3"})


def install() -> None:
    if not any(isinstance(f, _Lean) for f in sys.meta_path):
        sys.meta_path.insert(0, _Lean())


def remember_ca_key() -> None:
    """mitmproxy's `certs.load_pem_private_key`, remembering the keys it loaded (by their file's bytes and
    passphrase: a changed file loads and is checked again)."""
    from mitmproxy import certs

    load = certs.load_pem_private_key
    if getattr(load, "remembers", False):
        return
    loaded: dict[tuple[bytes, bytes | None], Any] = {}
    lock = threading.Lock()

    def remembered(data: bytes, password: bytes | None) -> Any:
        key = (bytes(data), password)
        with lock:
            if key in loaded:
                return loaded[key]
        private_key = load(data, password)
        with lock:
            if len(loaded) < 8:  # a CA or two a process
                loaded[key] = private_key
        return private_key

    remembered.remembers = True  # type: ignore[attr-defined]
    certs.load_pem_private_key = remembered


def unchecked_messages() -> None:
    """mitmproxy's requests and responses built without the per-field type check of `__debug__` (see above)."""
    from mitmproxy import http

    checked = http.MessageData.__dict__.get("__post_init__")
    if checked is not None and not getattr(checked, "unchecked", False):
        http.MessageData.__post_init__ = _unchecked  # type: ignore[method-assign]


def _unchecked(self: Any) -> None:
    return None


_unchecked.unchecked = True  # type: ignore[attr-defined]


def quick_dispatch() -> None:
    """`AddonManager.trigger_event` without the addons that have no handler for the event (see above): the
    same handlers in the same order, each as mitmproxy calls it (`invoke_addon` under `safecall`)."""
    from mitmproxy import addonmanager, exceptions

    manager: Any = addonmanager.AddonManager
    real = manager.trigger_event
    if getattr(real, "quick", False) or not {"chain", "safecall", "invoke_addon", "AddonHalt"} <= set(
            real.__code__.co_names):
        return  # another mitmproxy than the one this was written for: its own dispatch

    async def trigger_event(self: Any, event: Any) -> None:
        name = event.name
        for addon in self.chain:
            if not _handles(addon, name):
                continue  # `invoke_addon` would have found nothing to call
            try:
                with addonmanager.safecall():
                    await self.invoke_addon(addon, event)
            except exceptions.AddonHalt:
                return

    trigger_event.quick = True  # type: ignore[attr-defined]
    manager.trigger_event = trigger_event


def _handles(addon: Any, name: str) -> bool:
    """Whether mitmproxy's `_iter_hooks` yields anything for `addon`: a true attribute `name` on it or on
    an addon under it (`addonmanager.traverse`, which follows an `addons` attribute)."""
    if getattr(addon, name, None):
        return True
    return hasattr(addon, "addons") and any(_handles(child, name) for child in addon.addons)


class _Lean(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in LAZY and fullname != ONBOARDING:
            return None
        spec = _real_spec(fullname, path, target, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        if fullname in LAZY:
            spec.loader = importlib.util.LazyLoader(spec.loader)
            return spec
        shim = importlib.machinery.ModuleSpec(fullname, _OnboardingLoader(spec), origin=spec.origin,
                                              is_package=spec.submodule_search_locations is not None)
        shim.submodule_search_locations = spec.submodule_search_locations
        shim.has_location = spec.has_location
        return shim


def _real_spec(fullname: str, path: Any, target: Any, skip: object) -> Any:
    for finder in sys.meta_path:
        if finder is skip or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _OnboardingLoader(importlib.abc.Loader):
    """The onboarding app's module with only `app` in it, a stand-in; any other name loads the real module."""

    def __init__(self, real: importlib.machinery.ModuleSpec) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        app = DeferredApp(lambda: self._load(module))
        # `app`, then any other name from the real module (PEP 562), which loads it
        vars(module).update(app=app, __getattr__=lambda name: getattr(app.module(), name))

    def _load(self, module: ModuleType) -> ModuleType:
        real = importlib.util.module_from_spec(self.real)
        assert self.real.loader is not None
        # Flask finds its templates beside the module of this name: the stand-in, whose file is the real one's
        self.real.loader.exec_module(real)
        return real


class DeferredApp:
    """A WSGI app that builds the real one on its first call; `config` set before then is handed over."""

    def __init__(self, load: Callable[[], ModuleType]) -> None:
        self._load = load
        self._module: ModuleType | None = None
        self._lock = threading.Lock()
        self._config: dict[str, Any] = {}

    def module(self) -> ModuleType:
        with self._lock:
            if self._module is None:
                module = self._load()
                module.app.config.update(self._config)
                self._module = module
            return self._module

    @property
    def config(self) -> Any:
        return self._config if self._module is None else self._module.app.config

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        app: Any = self.module().app
        return app(environ, start_response)
