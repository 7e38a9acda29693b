"""Worst-case prompt texts: the per-request text pipeline's time over hostile shapes, and its growth per doubling.

A request body reaches the proxy up to its body cap (32 MB), and every text in it goes through
redaction, the volatile-value scrub, normalisation (both fingerprints) and, on a miss, the lexical
tokens and the guard. This times that pipeline on texts built to make a scan restart from every
character ("{{{{", "[1,[1,", " 'a 'a", long runs of spaces or capitals...) at doubling sizes and
reports the ratio per doubling: about 2 is linear, about 4 quadratic.

    .venv/bin/python scripts/bench.py normalise_worst            # 64-512 KB: benchmark/results/normalise_worst.md
    .venv/bin/python scripts/bench.py normalise_worst --quick    # 8-32 KB: /tmp/semula-bench/normalise_worst.md
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import common
from bench.common import log


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _indented(n: int) -> str:
    return "".join(" " * (i % 40) + "x = 1\n" for i in range(n // 20 + 1))[:n]


SHAPES: dict[str, Callable[[int], str]] = {
    "{ x n": lambda n: "{" * n,
    "[ x n": lambda n: "[" * n,
    '{"a": x n': lambda n: _repeat('{"a":', n),
    "[1, x n": lambda n: _repeat("[1,", n),
    "[1 x (fails after one value)": lambda n: _repeat("[1 x", n),
    '" x n': lambda n: '"' * n,
    "' x n": lambda n: "'" * n,
    '" a x n': lambda n: _repeat('" a', n),
    " 'a x n (quotes never closed)": lambda n: _repeat(" 'a", n),
    "'a + newline x n": lambda n: _repeat("'a\n", n),
    "unbalanced quotes": lambda n: _repeat('say "hello there\n', n),
    "newlines": lambda n: "\n" * n,
    "deep indentation": _indented,
    "digits": lambda n: "7" * n,
    "\\u escapes": lambda n: _repeat('"\\u00e9', n),
    "key: value lines": lambda n: _repeat("request_id: abc\nkey: value\n", n),
    "one huge line": lambda n: _repeat("word ", n),
    "capitals": lambda n: "A" * n,
    "inline code over spaces": lambda n: "`a" + " " * n + "b`",
    "inline code lines": lambda n: _repeat("` a\n", n),
    "quoted spaces + indentation": lambda n: 'x\n  y\n"a' + " " * n + 'b"',
    "mixed": lambda n: _repeat('{"a": [1, "b\n  c", \'d\'], `x` req_12345678 2024-01-01T00:00:00Z ', n),
}


def pipeline() -> Callable[[str], None]:
    """What the proxy runs on one prompt text: redaction, both fingerprints, lexical tokens, guard."""
    from semula.core.guard.check import guard
    from semula.core.nearmatch import lexical_tokens
    from semula.core.redact import redact_text
    from semula.core.request.canonical import CanonicalRequest, Message, context_fingerprint, normalised_fingerprint

    def run(text: str) -> None:
        text = redact_text(text)
        c = CanonicalRequest(provider="openai", method="POST", endpoint="/v1/chat/completions", query=(), headers=(),
                             model="m", system=None, messages=(Message("user", text),), tools=(), params={},
                             stream=False, body={})
        normalised_fingerprint(c)
        context_fingerprint(c)
        lexical_tokens(text)
        guard(text, text + " x")

    return run


def measure(sizes: list[int], cap: float) -> list[dict[str, Any]]:
    run = pipeline()
    rows = []
    for name, make in SHAPES.items():
        seconds: list[float | None] = []
        for size in sizes:
            if seconds and (seconds[-1] is None or seconds[-1] > cap):
                seconds.append(None)  # the last size already took longer than the cap
                continue
            text = make(size)
            t0 = time.perf_counter()
            run(text)
            seconds.append(time.perf_counter() - t0)
        log(f"{name}: {seconds}")
        rows.append({"shape": name, "seconds": seconds})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8-32 KB only, results under /tmp")
    parser.add_argument("--cap", type=float, default=60.0, help="skip a shape's larger sizes after a case over this")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    kb = [8, 16, 32] if args.quick else [64, 128, 256, 512]
    data = {"command": common.command("normalise_worst", argv), "machine": common.machine(), "sizes_kb": kb,
            "rows": measure([k * 1024 for k in kb], args.cap)}
    common.finish("normalise_worst", data, args.out, None, args.quick)
    return 0
