"""The store-backed matcher: the in-memory index, the near-match search, review and recordings upkeep.

Implements the cascade's lookups over a store; may import `core`, `providers`, `store`, `recordings`,
`embeddings`, `calllog`, never `proxy` or mitmproxy.
"""
