"""How a provider's SDK sends its key, declared by the provider's adapter (`Adapter.auth`).

`semula drift` re-sends a recorded request with the caller's own key: it reads the key from the
environment variables the provider's SDK reads, in the SDK's order, and sends it in the provider's
header. A provider whose calls are signed or exchanged (AWS SigV4, Google OAuth) declares why drift
cannot re-send them instead.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Auth", "KeyAuth", "NotResendable", "bearer_key"]


@dataclass(frozen=True)
class KeyAuth:
    """The key's environment variables (in the order the SDK tries them), its header and the header's
    value with ``{}`` for the key."""

    env: tuple[str, ...]
    header: str = "authorization"
    template: str = "Bearer {}"


@dataclass(frozen=True)
class NotResendable:
    """Calls a key alone cannot make again; `why` says how they are authorised ("AWS-signed")."""

    why: str


Auth = KeyAuth | NotResendable


def bearer_key(provider: str) -> KeyAuth:
    """The common case: ``Authorization: Bearer $<PROVIDER>_API_KEY``."""
    return KeyAuth((f"{provider.upper().replace('-', '_')}_API_KEY",))
