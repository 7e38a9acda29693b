"""NUL in Postgres text columns: escaped on the way in, restored on the way out, so the same recordings
work on both stores.

PostgreSQL's `text` cannot hold U+0000 (DuckDB's VARCHAR can), so a prompt or a model name with a NUL
could never be recorded. Every string this store sends is dumped through `encode` and every text value
it reads back is loaded through `decode` (psycopg adapters, registered on each connection by
`register`): NUL becomes U+FFFF followed by "0", and U+FFFF itself is doubled. U+FFFF is a Unicode
noncharacter, which real text does not contain, so a string with neither character (nearly every one)
is sent and read byte for byte as before, and a value stored before this escaping existed reads back
unchanged. The round trip is exact for every string; fingerprints are computed in Python before
storage, so they do not change. JSON columns (`canonical`, `headers`, settings) already hold NUL as the
six characters `\\u0000` (json.dumps escapes control characters), so they need nothing more.
"""

from __future__ import annotations

import re

from psycopg.adapt import AdaptersMap, Buffer
from psycopg.types.string import StrBinaryDumper, StrDumper, StrDumperUnknown, TextBinaryLoader, TextLoader

ESC = "\uffff"
_NUL = "\x00"
_ESCAPED = re.compile("\uffff([\uffff0])")


def encode(text: str) -> str:
    """`text` as the server can store it: NUL → ESC "0", ESC → ESC ESC; anything else unchanged."""
    if _NUL not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace(_NUL, ESC + "0")


def decode(text: str) -> str:
    """The inverse of `encode` (a lone ESC, never written by `encode`, is kept as it is)."""
    if ESC not in text:
        return text
    return _ESCAPED.sub(lambda m: _NUL if m.group(1) == "0" else ESC, text)


class _Escaping:
    _encoding: str

    def dump(self, obj: str) -> Buffer | None:
        return encode(obj).encode(self._encoding)


class NulSafeStrBinaryDumper(_Escaping, StrBinaryDumper):
    pass


class NulSafeStrDumper(_Escaping, StrDumper):
    pass


class NulSafeStrDumperUnknown(_Escaping, StrDumperUnknown):
    pass


class NulSafeTextLoader(TextLoader):
    def load(self, data: Buffer) -> bytes | str:
        value = super().load(data)
        return decode(value) if isinstance(value, str) else value


class NulSafeTextBinaryLoader(TextBinaryLoader):
    def load(self, data: Buffer) -> bytes | str:
        value = super().load(data)
        return decode(value) if isinstance(value, str) else value


def register(adapters: AdaptersMap) -> None:
    """Escape every str sent and restore every text/varchar read, on one connection's adapters.

    The order matters as in psycopg's own registration: the last dumper registered for `str` (the
    unknown-oid one, which the server casts to the column's type) is the default."""
    adapters.register_dumper(str, NulSafeStrBinaryDumper)
    adapters.register_dumper(str, NulSafeStrDumper)
    adapters.register_dumper(str, NulSafeStrDumperUnknown)
    for type_name in ("text", "varchar"):
        adapters.register_loader(type_name, NulSafeTextLoader)
        adapters.register_loader(type_name, NulSafeTextBinaryLoader)
