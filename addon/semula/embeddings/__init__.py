"""The optional embedding tier's machinery: the fastembed model, its background worker and the
in-memory search (the tier itself, wired to a store, is `engine.tiers.embedding`).

May import `core` and `store` (vectors are read and written through the store interface).
"""
