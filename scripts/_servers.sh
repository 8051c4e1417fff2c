# Sourced by scripts/test: install the MCP servers people install most (tools/servers: Playwright's, Chrome
# DevTools', the npm GitHub, filesystem, memory and sequential-thinking servers, Context7, Desktop Commander,
# mcp-server-commands) at the versions its lockfile pins into .tools/servers, for the tests of `checkpoint init`'s
# reviewed profiles and the end-to-end tests that drive them (with tools/npm's Node 22). The PyPI servers (git,
# time, fetch) come with the dev extra. Skipped when the installed tree matches the lockfile.
# No install script runs: Desktop Commander's would report the installation to its telemetry and its md-to-pdf's
# puppeteer would download a browser (PUPPETEER_SKIP_DOWNLOAD says so too, should one run); none of the servers
# needs one to start and list its tools.
servers() {
  local dest="$ROOT/.tools/servers" stamp
  command -v npm >/dev/null || { echo "npm is needed for the test servers (apt-get install npm)" >&2; return 1; }
  stamp="$(sha256sum "$ROOT/tools/servers/package-lock.json" | cut -d' ' -f1)"
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ] && [ -d "$dest/node_modules/@playwright/mcp" ]; then
    return 0
  fi
  mkdir -p "$dest"
  cp "$ROOT/tools/servers/package.json" "$ROOT/tools/servers/package-lock.json" "$dest/"
  (cd "$dest" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --silent >&2) ||
    { echo "installing the test servers failed" >&2; return 1; }
  echo "$stamp" >"$dest/.stamp"
}
servers
