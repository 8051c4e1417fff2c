"""A stream's log: positions, forgetting the oldest lines of a long GET stream, SSE framing, event ids."""

from __future__ import annotations

import asyncio

from checkpoint_mcp.gateway.streams import KEPT_LINES, Stream, StreamKind, parse_event_id, sse_event


def test_a_long_stream_forgets_its_oldest_lines_but_keeps_its_positions() -> None:
    stream = Stream("s1.get", StreamKind.STANDALONE)
    for i in range(3 * KEPT_LINES):
        stream.append(b'{"n":%d}\n' % i)
    assert stream.end == 3 * KEPT_LINES
    assert len(stream.lines) <= KEPT_LINES
    assert stream.line_at(0) is None
    assert stream.line_at(stream.end - 1) == b'{"n":%d}\n' % (3 * KEPT_LINES - 1)
    assert stream.line_at(stream.base) == stream.lines[0]


def test_a_finished_stream_takes_no_more_lines_and_wakes_its_readers() -> None:
    async def main() -> None:
        stream = Stream("s1.1", StreamKind.REQUEST, "tools/call")
        waiter = asyncio.ensure_future(stream.wait_beyond(0))
        await asyncio.sleep(0)
        assert not waiter.done()
        stream.append(b'{"id":1,"result":{}}\n', final=True)
        await asyncio.wait_for(waiter, 1)
        stream.append(b"late\n")
        assert stream.lines == [b'{"id":1,"result":{}}\n']

    asyncio.run(main())


def test_events_carry_the_line_as_data_and_an_id_that_parses_back() -> None:
    stream = Stream("abc.7", StreamKind.REQUEST)
    assert sse_event(b'{"a":1}\n', stream.event_id(3)) == b'id: abc.7/3\nevent: message\ndata: {"a":1}\n\n'
    assert sse_event(b'{"a":1}\n', None) == b'event: message\ndata: {"a":1}\n\n'
    assert parse_event_id(stream.event_id(3)) == ("abc.7", 3)
    assert parse_event_id("garbage") is None
