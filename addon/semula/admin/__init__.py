"""The running proxy's admin endpoint: the protocol (`protocol.py`: admin.json, its trust rules, the JSON of a
call), the proxy's server (`server.py`) and the callers' client (`client.py`).

Used by the proxy (which serves its store operations through it), the CLI, `session/`, the pytest plugin and the
review page. May import `store` (the data dir) only: never `proxy`, `session` or `cli`.
"""
