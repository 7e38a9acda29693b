"""The pure core: canonical requests, fingerprints, normalisation, the guard and the one cascade.

Nothing here does I/O, reads the clock or imports mitmproxy, DuckDB or another semula package: the proxy
and `semula eval` run the same decisions on plain values.
"""
