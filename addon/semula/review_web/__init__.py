"""`semula review web`: the review queue in a local browser page.

A small stdlib HTTP server (bound to loopback, a random token per run that only the page's own
origin holds and sends as a header) renders each open candidate with its two requests side by side, the changed words
and fields highlighted, and calls the same review operations as `semula review approve|reject`, so an
approval writes the same alias (store and recordings folder) by the same code path.

`highlight` is pure (the word and field diff, HTML-escaped: prompts are hostile input), `page`
renders HTML from plain dicts, `server` is the HTTP edge. The store is reached only through an
operations callable the CLI passes in; nothing here imports the engine, the store or click.
"""
