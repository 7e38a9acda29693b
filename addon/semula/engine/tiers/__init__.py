"""The near-match tiers: each proposes recordings for a request and keeps its index in step.

A tier is one module here implementing `base.NearTier`, plus its `core.tiers.Tier` member and
`NEAR_TIERS` row; `engine.near.NearSearcher` runs them in order and places them on threads.
"""
