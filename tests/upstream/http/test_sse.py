"""The event-stream parser keeps each event's data as the bytes the server sent, however the stream is cut."""

from __future__ import annotations

import pytest

from checkpoint_mcp.upstream.http.sse import Event, EventParser, EventTooLarge, to_line

STREAM = (
    b": keep-alive comment\n"
    b"id: e1\nretry: 250\ndata:\n\n"  # a priming event: an id and no data
    b'event: message\r\ndata: {"jsonrpc":"2.0","method":"x","params":{"t":"\xc3\xa9 \\u00e9"}}\r\n\r\n'
    b'data: {"jsonrpc":"2.0",\rdata:  "id":1,"result":{}}\r\r'
    b"event: endpoint\ndata: /messages?session=1\n\n"
)
EXPECTED = [
    Event("message", b"", "e1", 250),
    Event("message", b'{"jsonrpc":"2.0","method":"x","params":{"t":"\xc3\xa9 \\u00e9"}}', None, None),
    Event("message", b'{"jsonrpc":"2.0",\n "id":1,"result":{}}', None, None),
    Event("endpoint", b"/messages?session=1", None, None),
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, len(STREAM)])
def test_events_come_out_the_same_however_the_stream_is_cut(chunk: int) -> None:
    parser = EventParser()
    events = []
    for start in range(0, len(STREAM), chunk):
        events += parser.feed(STREAM[start : start + chunk])
    assert events == EXPECTED


def test_a_payload_becomes_one_line_with_its_bytes_kept() -> None:
    assert to_line(EXPECTED[1].data) == EXPECTED[1].data + b"\n"
    assert to_line(EXPECTED[2].data) == b'{"jsonrpc":"2.0",  "id":1,"result":{}}\n'  # a raw break is white space
    assert to_line(b"  \r\n ") == b""


def test_an_event_larger_than_the_limit_is_refused() -> None:
    parser = EventParser(max_event_bytes=100)
    with pytest.raises(EventTooLarge):
        parser.feed(b"data: " + b"x" * 200)
