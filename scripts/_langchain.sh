# Sourced by scripts/test (and run by the framework test when it is missing): make .venv-langchain, an environment
# of its own for langchain-mcp-adapters, which needs mcp<2 while checkpoint uses mcp 2.x. Skipped when the
# installed set matches tools/langchain/requirements.txt.
langchain_env() {
  local root dest stamp
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  dest="$root/.venv-langchain"
  stamp="$(sha256sum "$root/tools/langchain/requirements.txt" | cut -d' ' -f1)"
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$dest/bin/python" ]; then
    return 0
  fi
  "${PYTHON:-python3}" -m venv "$dest"
  "$dest/bin/python" -m pip install -q -r "$root/tools/langchain/requirements.txt" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$dest/bin/python" -c "import langchain_mcp_adapters.client" || { echo "installing langchain-mcp-adapters failed" >&2; return 1; }
  echo "$stamp" >"$dest/.stamp"
}
langchain_env
