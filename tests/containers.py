"""Container images for the deploy tests, made with the machine's own podman (FACTS.md: no registry is reachable).

* **The base image**: Debian bookworm with python3, its venv module and CA certificates, made with ``debootstrap
  --variant=minbase`` and ``podman import`` (``BASE_IMAGE``, named by its recipe). It is kept between runs: the one
  image the tests leave behind. Making it takes a minute or more on a fresh machine.
* **Checkpoint's image**: the repository's Dockerfile built from ``git archive HEAD`` on that base, once per test
  run (``image_for_run``), labelled with the run (``RUN_LABEL``) and removed with the run's containers at its end
  (``remove_run``, from the suite's ``pytest_sessionfinish``).

Both are made under a file lock in ``STATE`` (this machine's, shared by every run), so two pytest workers, or
scripts/test's early start and the suite, never make one twice: a second waits for the first and uses its image.
scripts/test starts ``python tests/containers.py prepare`` in the background before the lint and type gates, so on
a fresh machine the image is usually ready when the deploy tests need it.

pip inside the build runs with this machine's pip settings (``pip config list``: its files and its ``PIP_*``
variables), written to one pip.conf that is mounted read-only at /etc/pip.conf for the build alone, with every local
file or folder it names mounted read-only at the same path (a local index: the folder that holds its simple/); a
local path that does not exist here is left out, and said so in the build's log.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "checkpoint-tests"
RUN_ENV = "CHECKPOINT_TEST_RUN_ID"  # one test run: scripts/test or the suite's pytest_configure sets it
RUN_LABEL = "io.checkpoint.test-run"  # on every image and container a run makes, for remove_run
DEBIAN_MIRROR = os.environ.get("CHECKPOINT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = "python3,python3-venv,ca-certificates"
BASE_RECIPE = f"debootstrap --variant=minbase --include={BASE_PACKAGES} bookworm"
BASE_IMAGE = f"localhost/checkpoint-test-base:bookworm-{hashlib.sha256(BASE_RECIPE.encode()).hexdigest()[:12]}"
IMAGE_REPOSITORY = "localhost/checkpoint-test"
# podman on this kind of machine: runc (crun fails on its cgroups), limits the runtime may set, the host network.
RUNTIME = ("podman", "--runtime", "runc")
RUN_FLAGS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "host")
BASE_TIMEOUT = 900.0  # debootstrap fetches ~100 packages: minutes on a slow mirror
BUILD_TIMEOUT = 900.0  # pip installs the package and its dependencies from the index
PODMAN_TIMEOUT = 120.0
IMAGE_TIMEOUT = BASE_TIMEOUT + BUILD_TIMEOUT + 2 * PODMAN_TIMEOUT  # the longest a test waits for this run's image
PATH_SETTINGS = ("cert", "client-cert", "find-links", "constraint", "requirement", "index-url", "extra-index-url")


class ImageError(RuntimeError):
    """An image could not be made; the message carries the tool's output."""


def tool(name: str) -> str | None:
    """Where the command ``name`` is, on PATH or in the system folders apt puts debootstrap and haproxy in."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def podman(
    *args: str, timeout: float = PODMAN_TIMEOUT, check: bool = True, stdin: IO[bytes] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``podman --runtime runc ARGS``; its output as text.

    Raises:
        ImageError: podman is missing, or (``check``) exits non-zero.
    """
    if tool("podman") is None:
        raise ImageError("podman is missing: apt-get install podman buildah runc debootstrap (scripts/test does it)")
    done = subprocess.run([*RUNTIME, *args], stdin=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise ImageError(
            f"podman {shlex.join(args)[:300]} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done


def image_exists(name: str) -> bool:
    """True when podman's storage holds ``name``."""
    return podman("image", "exists", name, check=False).returncode == 0


@contextlib.contextmanager
def locked(name: str, timeout: float) -> Iterator[None]:
    """Hold the machine-wide lock ``STATE/name`` (an flock: released if the holder dies), waiting up to ``timeout``.

    Raises:
        ImageError: another holder kept it longer than ``timeout``.
    """
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / name, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ImageError(
                        f"{STATE / name} stayed locked for {timeout:.0f}s (an image being made?)"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_base_image(log: Path | None = None) -> str:
    """``BASE_IMAGE``, made now if podman lacks it (debootstrap, then ``podman import``); its name.

    Raises:
        ImageError: debootstrap or the import failed.
    """
    with locked("base-image.lock", BASE_TIMEOUT + PODMAN_TIMEOUT):
        if image_exists(BASE_IMAGE):
            return BASE_IMAGE
        debootstrap = tool("debootstrap")
        if debootstrap is None:
            raise ImageError("debootstrap is missing: apt-get install debootstrap (scripts/test does it)")
        work = Path(tempfile.mkdtemp(prefix="base-", dir=STATE))
        try:
            target = work / "root"
            started = time.monotonic()
            made = subprocess.run(
                [debootstrap, *shlex.split(BASE_RECIPE)[1:], str(target), DEBIAN_MIRROR],
                capture_output=True,
                text=True,
                timeout=BASE_TIMEOUT,
                check=False,
            )
            if made.returncode != 0:
                raise ImageError(
                    f"{BASE_RECIPE} failed ({made.returncode}):\n{made.stdout[-3000:]}{made.stderr[-3000:]}"
                )
            # What apt downloaded is not part of the system: keep it out of the image.
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (target / cache).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            with subprocess.Popen(["tar", "-C", str(target), "-c", "."], stdout=subprocess.PIPE) as tar:
                podman("import", "--message", BASE_RECIPE, "-", BASE_IMAGE, stdin=tar.stdout, timeout=BASE_TIMEOUT)
            if tar.returncode != 0:
                podman("image", "rm", BASE_IMAGE, check=False)
                raise ImageError(f"tar of the debootstrap tree failed ({tar.returncode})")
            _note(log, f"base image {BASE_IMAGE} made in {time.monotonic() - started:.0f}s")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return BASE_IMAGE


def pip_settings(folder: Path) -> tuple[list[str], list[str]]:
    """This machine's pip settings for a build: (``podman build`` volume flags, notes for the log).

    One pip.conf in ``folder``, holding every setting ``pip config list`` shows (files and ``PIP_*`` variables),
    mounted at /etc/pip.conf; each local file or folder a setting names is mounted read-only at its own path, and
    one that does not exist here is dropped from the setting (a note says so).
    """
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
    )
    sections: dict[str, dict[str, str]] = {}
    from_environment: set[str] = set()  # a PIP_* variable wins over the files, as in pip itself
    mounts: dict[str, str] = {}
    notes: list[str] = []
    for line in listed.stdout.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        section, _, name = key.rpartition(".")
        if section == ":env:":
            section = "global"
            from_environment.add(name)
        elif name in from_environment:
            continue
        value = raw.strip().strip("'\"")
        if name in PATH_SETTINGS:
            kept = []
            for item in value.split():
                local = item[len("file://") :] if item.startswith("file://") else item if item.startswith("/") else None
                if local is None:
                    kept.append(item)  # a remote index or page: the build reaches it as this machine does
                elif Path(local).exists():
                    kept.append(item)
                    # A local index's pages link to its files beside simple/ (../../files/…): mount the repository.
                    named = Path(local.rstrip("/"))
                    whole = str(named.parent) if name.endswith("index-url") and named.name == "simple" else local
                    mounts[whole] = whole
                else:
                    notes.append(f"pip setting {section}.{name}: {item} does not exist on this machine; left out")
            value = " ".join(kept)
            if not value:
                continue
        sections.setdefault(section, {})[name] = value
    conf = folder / "pip.conf"
    conf.write_text("".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for s, kv in sections.items()))
    volumes = ["-v", f"{conf}:/etc/pip.conf:ro"]
    for source in sorted(mounts):
        volumes += ["-v", f"{source}:{source}:ro"]
    notes.append(f"pip.conf for the build: {json.dumps(sections)}")
    return volumes, notes


def run_id() -> str:
    """This test run's id (``RUN_ENV``), made now if nothing set it."""
    return os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:12])


def image_for_run(run: str, log: Path | None = None) -> str:
    """Checkpoint's image for test run ``run``, built now from ``git archive HEAD`` if this run has none; its name.

    Raises:
        ImageError: the base image or the build failed.
    """
    name = f"{IMAGE_REPOSITORY}:{run}"
    with locked(f"run-{run}.lock", IMAGE_TIMEOUT):
        if image_exists(name):
            return name
        base = ensure_base_image(log)
        work = Path(tempfile.mkdtemp(prefix=f"build-{run}-", dir=STATE))
        try:
            context = work / "context"
            context.mkdir()
            with subprocess.Popen(["git", "-C", str(ROOT), "archive", "HEAD"], stdout=subprocess.PIPE) as archive:
                unpacked = subprocess.run(
                    ["tar", "-x", "-C", str(context)], stdin=archive.stdout, check=False, timeout=120
                )
            if archive.returncode != 0 or unpacked.returncode != 0:
                raise ImageError(f"git archive HEAD | tar -x failed ({archive.returncode}, {unpacked.returncode})")
            volumes, notes = pip_settings(work)
            for note in notes:
                _note(log, note)
            started = time.monotonic()
            podman(
                "build",
                "--isolation",
                "chroot",
                "--pull=never",
                "--layers=false",  # no intermediate images left behind
                "--format",
                "docker",  # the image format that keeps HEALTHCHECK
                "--build-arg",
                f"BASE_IMAGE={base}",
                "--label",
                f"{RUN_LABEL}={run}",
                *volumes,
                "-t",
                name,
                str(context),
                timeout=BUILD_TIMEOUT,
            )
            _note(log, f"image {name} built from HEAD in {time.monotonic() - started:.0f}s")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return name


def remove_run(run: str) -> None:
    """Remove what test run ``run`` made (its containers and images; never the base image), once its image is no
    longer being built. Costs nothing for a run that made none."""
    lock = STATE / f"run-{run}.lock"
    if not lock.exists():
        return
    with locked(lock.name, IMAGE_TIMEOUT):
        for kind in ("container", "image"):
            listed = podman(kind, "ls", "--all", "--quiet", "--filter", f"label={RUN_LABEL}={run}", check=False)
            ids = listed.stdout.split()
            if ids:
                podman(kind, "rm", "--force", *ids, check=False)
    lock.unlink(missing_ok=True)


class Container:
    """One container of an image, as the deploy runs it: ``podman run -d`` with a read-only root and a tmpfs at /tmp,
    as the image's own user, on the host network, labelled with the test run; removed on exit."""

    def __init__(
        self,
        image: str,
        *args: str,
        env: dict[str, str] | None = None,
        volumes: tuple[str, ...] = (),
        user: str | None = None,
    ) -> None:
        self.name = f"checkpoint-test-{uuid.uuid4().hex[:12]}"
        flags = ["--label", f"{RUN_LABEL}={run_id()}", *RUN_FLAGS, "--read-only", "--tmpfs", "/tmp"]
        if user is not None:
            flags += ["--user", user]
        for key, value in (env or {}).items():
            flags += ["--env", f"{key}={value}"]
        for volume in volumes:
            flags += ["--volume", volume]
        podman("run", "--detach", "--name", self.name, *flags, image, *args)

    def logs(self) -> str:
        """What the container wrote to stdout and stderr so far."""
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The logs, once they hold ``text``.

        Raises:
            AssertionError: not within ``timeout``, or the container stopped first.
        """
        deadline = time.monotonic() + timeout
        while True:
            logs = self.logs()
            if text in logs:
                return logs
            if not self.running() or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} never said {text!r}; its logs:\n{logs[-4000:]}")
            time.sleep(0.1)

    def running(self) -> bool:
        """True while the container runs."""
        return self.inspect("{{.State.Running}}") == "true"

    def inspect(self, template: str) -> str:
        """``podman inspect --format TEMPLATE`` of the container."""
        return podman("inspect", "--format", template, self.name, check=False).stdout.strip()

    def healthcheck(self) -> subprocess.CompletedProcess[str]:
        """Run the image's HEALTHCHECK in the container now (``podman healthcheck run``)."""
        return podman("healthcheck", "run", self.name, check=False)

    def stop(self, timeout: int = 20) -> int:
        """SIGTERM (then SIGKILL after ``timeout`` s, as a platform does); the exit code."""
        podman("stop", "--time", str(timeout), self.name, timeout=timeout + PODMAN_TIMEOUT)
        return int(self.inspect("{{.State.ExitCode}}"))

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        podman("rm", "--force", "--time", "0", self.name, check=False)


def free_port() -> int:
    """A free TCP port on loopback, for a container on the host network to listen on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(image: str, *args: str, entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
    """``podman run --rm`` of ``image`` with ``args``, read-only, as the image's user; it ends on its own."""
    flags = ["--rm", "--label", f"{RUN_LABEL}={run_id()}", *RUN_FLAGS, "--read-only", "--tmpfs", "/tmp"]
    if entrypoint is not None:
        flags += ["--entrypoint", entrypoint]
    return podman("run", *flags, "--no-healthcheck", image, *args, check=False)


def _note(log: Path | None, text: str) -> None:
    line = f"checkpoint tests: {text}\n"
    if log is None:
        sys.stderr.write(line)
    else:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line)


def main(argv: list[str]) -> int:
    """``prepare``: the base image, then this run's image (``RUN_ENV``), as scripts/test does in the background;
    ``cleanup``: remove the run's images and containers once its image is no longer being built."""
    if argv not in (["prepare"], ["cleanup"]):
        print(
            "usage: python tests/containers.py prepare|cleanup   (CHECKPOINT_TEST_RUN_ID names the run)",
            file=sys.stderr,
        )
        return 2
    try:
        if argv == ["cleanup"]:
            remove_run(run_id())
            return 0
        image_for_run(run_id())
    except (ImageError, OSError, subprocess.SubprocessError) as exc:
        print(
            f"checkpoint tests: preparing the images failed (the deploy tests will try again): {exc}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
