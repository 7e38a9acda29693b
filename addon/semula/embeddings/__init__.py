"""The optional embedding tier: the fastembed model, its background worker and the in-memory search.

May import `core` and `store` (vectors are read and written through the store interface).
"""
