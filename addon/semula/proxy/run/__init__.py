"""The proxy's run, around the calls: its options (`options.py`), its start and stop (`lifecycle.py`, `startup.py`),
the store thread (`storethread.py`) and the folder's watch (`folderwatch.py`), what it publishes about itself
(`runinfo.py`), what it keeps between calls for the tests (`refusals.py`, `scopes.py`, `runs.py`) and for `max_age`
(`expiry.py`), the terminal's safety (`terminal.py`) and malloc's arenas (`malloc.py`).

Imports nothing of `call`, `realtime` or the hooks; may import `admin`, `engine`, `recordings`, `store`, `calllog`,
`providers`, `core`.
"""
