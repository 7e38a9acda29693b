"""The fake provider's large binary answers: `GET /v1/files/file-big<KiB>-<seed>/content`.

OpenAI's file content endpoint answers with the file's raw bytes (`application/octet-stream`), as a
TTS answer does: a real endpoint whose answer is megabytes of binary. Here the id says how large
(`file-big300-x`: 300 KiB) and the bytes depend only on size and seed, so two ids (or two query
strings) with the same size and seed get the same bytes: what a content-addressed sidecar shares.
"""

from __future__ import annotations

import hashlib
import re

BIG_FILE = re.compile(r"/v1/files/file-big(?P<kib>\d{1,5})-(?P<seed>[a-z0-9]{1,32})(?:-\d+)?/content")
MAX_KIB = 16 * 1024


def big_file(path: str) -> bytes | None:
    """The bytes of a large file id's content (an MP3-like header, then hash blocks), or None."""
    match = BIG_FILE.fullmatch(path)
    if match is None or not 0 < int(match.group("kib")) <= MAX_KIB:
        return None
    size, seed = int(match.group("kib")) * 1024, match.group("seed").encode()
    blocks = b"".join(hashlib.sha256(seed + i.to_bytes(4, "big")).digest() for i in range(size // 32 + 1))
    return (b"ID3\x04\x00\x00" + blocks)[:size]
