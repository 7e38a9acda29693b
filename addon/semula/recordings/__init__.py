"""The recordings folder people commit: the file format, its validator, safe paths and the sync with the store;
binary sidecars (`sidecars`), which recordings are unused or stale (`usage`), and what changed between two
versions of the folder (`diff`, `diffview`, `diffsides`).

Every file in it is untrusted input. May import `core`, `providers`, `store` and `calllog`.
"""
