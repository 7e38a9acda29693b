"""The mitmproxy edge: the hooks (`addon.py`) and the addon's commands (`commands.py`) at the top, over three folders
by job: `call/` (one provider call, decided, answered, recorded and logged), `realtime/` (Realtime WebSocket
conversations) and `run/` (the proxy's run: options, start and stop, the store thread, what it keeps between calls).

Arrows point down: the top imports the folders, `realtime` imports `call`, `call` imports `run`, and `run` imports
none of them. The only package that imports mitmproxy (with `mitm_addon.py`); it asks `engine` and `core` for every
decision, and serves the admin endpoint through `admin`.
"""
