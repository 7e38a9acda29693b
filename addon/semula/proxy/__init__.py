"""The mitmproxy edge: hooks, options, the store thread, the call log and the admin socket.

The only package that imports mitmproxy (with `mitm_addon.py`); it asks `engine` and `core` for every decision.
"""
