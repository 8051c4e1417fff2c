# Shared by scripts/test and scripts/screenshots: Debian's chromium for the browser tests (driven by Playwright
# for Python, which is pointed at it: `playwright install` is never run, no browser is downloaded by a tool).
# Usage: . scripts/_browser.sh   (after _env.sh). Set CHECKPOINT_CHROMIUM to use another chromium binary.
if [ -z "${CHECKPOINT_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  echo "== apt-get install chromium (for the browser tests)" >&2
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "the browser tests need Debian's chromium: run 'apt-get install chromium' as root" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq chromium >/dev/null
fi
