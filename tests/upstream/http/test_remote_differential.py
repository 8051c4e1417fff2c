"""Differential tests over real HTTP: the official SDK client talks to a real Streamable HTTP server directly,
then through `checkpoint --upstream-url` over stdio; both must see the same answers, notifications and
server-to-client requests (sampling, elicitation, roots), in both protocol eras. Results differ only by the
journal's ``_meta`` key."""

from __future__ import annotations

from pathlib import Path

import pytest

from httpservers import sdk_server
from remote_compare import compare
from support import done_count

MODES = ["legacy", "2026-07-28"]


@pytest.mark.parametrize("flavour", ["sse", "json"])
@pytest.mark.parametrize("mode", MODES)
def test_an_sdk_server_over_streamable_http_answers_the_same_through_the_proxy(
    journal: str, tmp_path: Path, mode: str, flavour: str
) -> None:
    calls = [("send_email", {"to": "ann@example.com", "subject": "hello"}), ("progress", {"steps": 3})]
    # A JSON-only server of the handshake era has no stream to ask the client on; in 2026-07-28 a question is an
    # input_required result, which needs none.
    asks = flavour == "sse" or mode != "legacy"
    if asks:
        calls.append(("confirm_gift", {"to": "bob"}))
    if mode == "legacy" and asks:
        calls += [("ask_model", {"question": "six times seven?"}), ("list_client_roots", {})]
    flags = ["--json"] if flavour == "json" else []
    with sdk_server(tmp_path, *flags) as server:
        proxied = compare(server, mode, calls, journal)
    seen = proxied["seen"]
    assert seen["elicit"] == (["Send a gift to bob?"] if asks else [])
    if mode == "legacy" and asks:
        assert seen["sampling"] == [{"type": "text", "text": "six times seven?"}]
        assert seen["roots"] == [True]
        assert [entry["data"] for entry in seen["log"]] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    if flavour == "sse":
        assert [step for step, _, _ in seen["progress"]] == [1, 2, 3]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2  # once directly, once through the proxy
