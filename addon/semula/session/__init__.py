"""One proxy around a run, and what its clients need: shared by `semula exec`, `semula env`,
`semula proxy` and the pytest plugin (none of it is CLI).

`run` starts or reuses the proxy and reports on the run; `clientenv` gives clients the proxy, the CA
and placeholder keys; `ca` makes mitmproxy's CA once; `aws_env`, `google_env` and `java_env` hold
each ecosystem's own. May import `core`, `providers` and `admin`; never `cli`.
"""
