# Sourced by scripts/run and scripts/test: find a Python >= 3.12 and make .venv with everything installed.
# Exits with a clear sentence when no suitable Python exists.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

is_312() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

find_python() {
  local candidates=()
  [ -n "${SEMULA_PYTHON:-}" ] && candidates+=("$SEMULA_PYTHON")
  candidates+=(python3.14 python3.13 python3.12 python3 python)
  if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | sort -rV); do
      candidates+=("$(pyenv root)/versions/$v/bin/python3")
    done
  fi
  for dir in "$HOME/.pyenv/versions"/*/bin /usr/local/bin /opt/homebrew/bin /usr/bin; do
    [ -x "$dir/python3" ] && candidates+=("$dir/python3")
  done
  for c in "${candidates[@]}"; do
    local path
    path="$(command -v "$c" 2>/dev/null || true)"
    [ -z "$path" ] && [ -x "$c" ] && path="$c"
    if [ -n "$path" ] && is_312 "$path"; then echo "$path"; return 0; fi
  done
  return 1
}

ensure_venv() {
  # $1: the extras to install, e.g. "dev,embeddings,analysis"
  local extras="$1" stamp="$VENV/.semula-installed"
  if [ ! -x "$VENV/bin/python" ] || ! is_312 "$VENV/bin/python"; then
    local py
    if ! py="$(find_python)"; then
      echo "semula needs Python 3.12 or newer (mitmproxy 12 requires it), and none was found on PATH or under pyenv." >&2
      echo "Install one (e.g. 'pyenv install 3.12') or set SEMULA_PYTHON=/path/to/python3.12, then run this again." >&2
      exit 1
    fi
    echo "semula: creating .venv with $py" >&2
    rm -rf "$VENV"
    "$py" -m venv "$VENV"
  fi
  local want
  want="$extras $(cat "$ROOT/pyproject.toml" | cksum)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "semula: installing semula[$extras] into .venv (one resolve)" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    # One resolve for everything: mitmproxy pins h11/tornado and friends. --no-compile: pip would compile
    # every installed module (63 s against 25 s for this install); Python compiles, and keeps, the ones a
    # run imports, the first time it does.
    "$VENV/bin/python" -m pip install -q --no-compile -e "$ROOT[$extras]" >&2
    "$VENV/bin/python" -m pip check >&2
    echo "$want" > "$stamp"
  fi
}
