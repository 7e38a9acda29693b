"""One intercepted provider call: who it is for (`caller.py`, `identity.py`), its per-flow state (`flowstate.py`),
the decision and the answer served or refused (`call.py`, `fastpath.py`, `lookups.py`, `answer.py`, `sidecalls.py`,
`mcp.py`), the forwarded answer recorded (`recorder.py`, `bodies.py`), and what it leaves behind: the call-log row
(`calllog.py`), the headers and mitmweb comment (`headers.py`) and the console line (`console.py`).

`parts.py` is the typed value every part shares (the hooks, the call, the recorder, the commands and Realtime).
May import `run` (never `realtime` or the hooks above it), `engine`, `recordings`, `providers`, `calllog`, `core`.
"""
