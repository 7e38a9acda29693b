"""Realtime over WebSocket: a recorded conversation, its file, and the turn-by-turn replay matcher.

A Realtime session (OpenAI `/v1/realtime`, Azure `/openai/realtime`) is not one request and one answer
but a conversation: client and server messages in order. `conversation` is the pure part (the model,
the normalisation of volatile ids and timestamps, the matcher that answers each client message with
the server messages that followed it); `fileformat` turns a conversation into reviewable JSON with its
audio in one sidecar and back, refusing a hostile file with a reason; `folder` is the only part here
that touches files. The mitmproxy hooks and the local answerer live in `proxy/`.

May import `core` and `recordings` (its safe-path and sidecar helpers).
"""
