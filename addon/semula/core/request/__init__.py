"""The request as the cache sees it: the provider-neutral canonical request and its fingerprints
(`canonical`), the normalised view of prompt text (`normalise`, `normalise_layout`), parameters in one
form (`params`) and a project's generated JSON keys (`scrubkeys`). Pure, like all of `core`: imports
only `core` and the standard library.
"""
