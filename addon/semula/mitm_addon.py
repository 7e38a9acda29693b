"""Entry script for mitmproxy: `mitmdump -s <this file>` (semula proxy does this for you)."""

from semula.proxy.addon import SemulaAddon

addons = [SemulaAddon()]
