"""The recordings folder people commit: the file format, its validator, safe paths and the sync with the store;
binary sidecars (`sidecars`), and which recordings are unused or stale (`usage`).

Every file in it is untrusted input. May import `core`, `providers`, `store` and `calllog`.
"""
