"""semula: record LLM API calls once, replay them in tests (a mitmproxy addon, a CLI and a pytest plugin).

Packages, from the pure centre outwards: `core` (the decision), `providers` (the adapters), `store`,
`recordings` (the committed folder), `embeddings`, `engine` (the store-backed matcher), `proxy` (the mitmproxy
edge), `reporting` and `cli`. Imports only point inwards; `structure_check.py` keeps it so.
"""
