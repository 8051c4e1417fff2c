"""@playwright/mcp (npm, pinned) with Debian's chromium, after a plain `checkpoint init`: a page served from a
loopback HTTP server counts what the browser really did. Clicking the same button twice in one session is two
clicks, pressing the same key twice is two key presses, and a new session can open the page the last session
opened (`file:` URLs are blocked by the server, so the page is served over HTTP).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from .agent_sessions import Project, Session, Tally, plain_init, session
from realservers import BY_PROFILE

PAGE = b"""<!doctype html>
<html><head><title>Counter</title></head><body>
<h1>Counter</h1>
<button id="count" onclick="fetch('/click', {method: 'POST'})">Count</button>
<script>
document.addEventListener('keydown', (e) => fetch('/key?k=' + encodeURIComponent(e.key), {method: 'POST'}));
</script>
</body></html>
"""


class CountingPage:
    """A loopback HTTP server whose page reports every load, click and key press back to it."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/":
                    page.seen["load"] += 1
                    self._answer(PAGE, "text/html")
                else:
                    self._answer(b"", "text/plain", 404)

            def do_POST(self) -> None:
                page.seen["click" if self.path == "/click" else f"key {self.path.rpartition('=')[2]}"] += 1
                self._answer(b"", "text/plain")

            def _answer(self, body: bytes, kind: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def wait_for(self, what: str, count: int) -> int:
        """How often ``what`` happened, once it has ``count`` times (or after 10 s, whatever it is then)."""
        deadline = time.monotonic() + 10
        while self.seen[what] < count and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # a late extra one would show now
        return self.seen[what]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def page() -> Iterator[CountingPage]:
    served = CountingPage()
    yield served
    served.close()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return plain_init(tmp_path / "project", {"playwright": BY_PROFILE["playwright"].entry(tmp_path)})


def button_ref(snapshot: str) -> str:
    """The element reference of the Count button in a page snapshot (``button "Count" [ref=e5]``)."""
    found = re.search(r'button "Count" \[ref=(e\d+)\]', snapshot)
    assert found, snapshot
    return found.group(1)


@pytest.mark.timeout(240)
def test_clicks_and_keys_repeated_in_a_session_and_a_page_opened_again_in_the_next_all_run(
    project: Project, page: CountingPage
) -> None:
    assert "profile @playwright/mcp 0.0.86" in project.summary
    tally = Tally()

    async def call(agent: Session, tool: str, **arguments: object) -> str:
        return tally.meant(tool, await agent.call("playwright", tool, arguments)).text

    seen: list[str] = []

    async def scenario() -> None:
        async with session(project) as first:
            await call(first, "browser_navigate", url=page.url)
            ref = button_ref(await call(first, "browser_snapshot"))
            for _ in range(2):  # the same click twice: the agent means two clicks
                await call(first, "browser_click", element="Count button", target=ref)
            await anyio.to_thread.run_sync(page.wait_for, "click", 2)
            for _ in range(2):
                await call(first, "browser_press_key", key="a")
        async with session(project) as second:  # a new browser: it must open the page the last session opened
            await call(second, "browser_navigate", url=page.url)
            seen.append(await call(second, "browser_snapshot"))

    anyio.run(scenario)
    tally.effects("clicks on Count", page.wait_for("click", 2), 2)
    tally.effects("key presses of 'a'", page.wait_for("key a", 2), 2)
    tally.effects("loads of the page", page.wait_for("load", 2), 2)
    tally.assert_clean()
    assert "Counter" in seen[0], "the new session's browser shows the page"
