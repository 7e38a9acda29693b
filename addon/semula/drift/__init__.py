"""`semula drift`: re-send recorded requests to the live provider and say what changed.

`compare` is pure (two answers in, the drift with its severity out: JSON shape by path, a stream's
event types, usage, the answer text's similarity); `select` picks the recordings and applies the
cost caps; `send` is the edge that calls the provider with httpx; `run` ties them and re-records in
place under `--update`. MCP recordings go only to a server the user names for the run, one session per
server (`mcpsend`: the edge; `mcpcheck`: grouping and comparing by value). May import `core`, `providers`
and `recordings`.
"""
