"""Realtime WebSocket conversations in the proxy: mitmproxy's WebSocket hooks (`hooks.py`), the local answerer of
replayed conversations (`answerer.py`) and the message cap read from each frame's header (`limits.py`).

May import `call` (the shared parts, the caller, the call-log row) and `run`; never the hooks above it.
"""
