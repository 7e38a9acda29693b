"""semula: record LLM API calls once, replay them in tests (a mitmproxy addon, a CLI and a pytest plugin).

Packages, from the pure centre outwards: `core` (the decision), `providers` (the adapters), `store`,
`recordings` (the committed folder), `embeddings`, `engine` (the store-backed matcher), `proxy` (the mitmproxy
edge), `reporting` and `cli`. Imports only point inwards; `structure_check.py` keeps it so.
"""

# Core knows no provider: it receives the providers' parameter rules as data, one frozen table built from
# the static adapter registry and bound here, once, whatever module of the package is imported first, so
# no fingerprint depends on which adapters a process happened to import.
from semula.core.request.params import bind_param_rules as _bind_param_rules  # noqa: E402
from semula.providers import PARAM_RULES as _PARAM_RULES  # noqa: E402

_bind_param_rules(_PARAM_RULES)
