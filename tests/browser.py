"""A real browser for the tests and the screenshots: Debian's chromium, driven by Playwright for Python.

The browser is the machine's own (`apt-get install chromium`, which scripts/test does when it is missing),
never one downloaded by Playwright: ``executable_path`` points at it and ``playwright install`` is never run.
Each use gets a fresh profile directory. Flags keep it off the network and quiet on a headless machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, expect, sync_playwright

from support import DEFAULT_TIMEOUT

CHROMIUM = os.environ.get("CHECKPOINT_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 900}

# A page's assertions wait as long as the suite's other waits: Playwright's own 5 s is shorter than what a page
# that starts an upstream (a settle's probe) takes on a machine busy with the suite's other workers.
expect.set_options(timeout=DEFAULT_TIMEOUT * 1000)


@contextmanager
def chromium(profile: Path, **context: object) -> Iterator[BrowserContext]:
    """A browser context of the machine's chromium with a fresh profile in ``profile``."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test does it)")
    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=ARGS, viewport=VIEWPORT, **context
        )
        try:
            yield browser
        finally:
            browser.close()
