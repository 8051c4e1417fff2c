# Shared by scripts/demo and scripts/test: make .venv (Python >= 3.11) and install this package into it.
# Usage: . scripts/_env.sh EXTRAS   (EXTRAS like "dev,postgres"; empty for the plain package)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" - <<'PY' || { echo "checkpoint needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
fi
spec="."
[ -n "${1:-}" ] && spec=".[${1}]"
.venv/bin/python -m pip install -q -e "$spec" 2>&1 | grep -v '^WARNING: Location' >&2 || true
.venv/bin/python -c "import checkpoint_mcp" || { echo "installing checkpoint-mcp failed" >&2; exit 1; }
export PATH="$ROOT/.venv/bin:$PATH"
