# Shared by scripts/test: what the deploy tests (tests/deploy) need besides Python: podman, buildah, runc and
# debootstrap to build the Dockerfile's image on a local Debian base (no registry is needed), and haproxy to drive
# compose's load balancer; installed with apt when missing, as _browser.sh does for chromium.
# For a whole run (no arguments), the images are then prepared in the background (tests/containers.py prepare:
# the cached base image, then this run's image from `git archive HEAD`), while the gates and the other tests run;
# the deploy tests wait for it. On exit the run's images are removed (the base image is kept).
# Usage: . scripts/_containers.sh   (after _env.sh; sees scripts/test's arguments)
export PATH="$PATH:/usr/sbin:/sbin"  # debootstrap and haproxy live there
missing=()
for tool in podman buildah runc debootstrap haproxy; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== apt-get install ${missing[*]} (for the deploy tests)" >&2
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "the deploy tests need ${missing[*]}: run 'apt-get install ${missing[*]}' as root" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ $# -eq 0 ]; then
  CHECKPOINT_TEST_RUN_ID="${CHECKPOINT_TEST_RUN_ID:-$(python -c 'import uuid; print(uuid.uuid4().hex[:12])')}"
  export CHECKPOINT_TEST_RUN_ID
  images_log="$(mktemp "${TMPDIR:-/tmp}/checkpoint-images-XXXXXX.log")"
  echo "== preparing the deploy tests' images in the background (log: $images_log)" >&2
  python tests/containers.py prepare >"$images_log" 2>&1 &
  images_pid=$!
  trap 'wait "$images_pid" || { echo "== the images prepared in the background failed:" >&2; tail -20 "$images_log" >&2; }
        rm -f "$images_log"; python tests/containers.py cleanup' EXIT
fi
