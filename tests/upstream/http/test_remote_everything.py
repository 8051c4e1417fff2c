"""The reference server from npm, ``@modelcontextprotocol/server-everything``, in its streamable-HTTP mode:
the official SDK client sees the same through `checkpoint --upstream-url` as talking to it directly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from httpservers import HttpServer, everything_server
from remote_compare import compare

CALLS = [
    ("echo", {"message": "hello through the journal"}),
    ("get-sum", {"a": 2, "b": 40}),
    ("get-structured-content", {"location": "New York"}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-tiny-image", {}),
    ("get-resource-links", {"count": 2}),
    ("trigger-long-running-operation", {"duration": 1, "steps": 3}),
]


@pytest.fixture(scope="module")
def everything() -> Iterator[HttpServer]:
    with everything_server() as server:
        yield server


# "auto" probes server/discover first and falls back to initialize, as this server speaks the handshake era.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_server_everything_over_streamable_http_answers_the_same_through_the_proxy(
    journal: str, everything: HttpServer, mode: str
) -> None:
    proxied = compare(everything, mode, CALLS, journal)
    assert proxied["version"] == "2025-11-25"
    assert proxied["results"][1]["content"][0]["text"] == "The sum of 2 and 40 is 42."
    assert [step for step, _, _ in proxied["seen"]["progress"]] == [1, 2, 3]
