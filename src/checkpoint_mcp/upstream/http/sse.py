"""Server-sent events, parsed incrementally, with each event's ``data`` kept as the bytes the server sent.

The relay writes what a remote server sent as the line its stdio client reads, so this parser never decodes and
re-encodes a payload: it splits the stream on line ends (CRLF, LF or CR, as the HTML standard's event-stream
format says), strips the one optional space after a field's colon, and joins the ``data`` lines of one event with
``\\n``. ``to_line`` then makes one JSON-RPC line of a payload: a JSON text can hold a raw line break only as
white space between tokens, so replacing each with a space changes no value.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_EVENT_BYTES = 64 << 20  # one event larger than this is refused (a runaway stream, not a message)


class Event(NamedTuple):
    """One dispatched event: its type (``message`` by default), data bytes, and the id and retry it set."""

    event: str
    data: bytes
    id: str | None  # the event's own ``id`` field, if it had one
    retry: int | None  # a ``retry`` field (milliseconds), if the event carried one


class EventTooLarge(ValueError):
    """An event grew beyond ``MAX_EVENT_BYTES`` before its blank line."""


class EventParser:
    """Feed it chunks of an event stream; it returns the events they complete."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_event_bytes
        self._data: list[bytes] = []
        self._size = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._seen = False  # some field of the current event was seen
        self._skip_lf = False  # the last chunk ended in CR: a LF at the start of the next one belongs to it

    def feed(self, chunk: bytes) -> list[Event]:
        """The events completed by ``chunk``.

        Raises:
            EventTooLarge: the current event exceeds the size limit.
        """
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        self._buffer += chunk
        events: list[Event] = []
        start = 0
        buffer = self._buffer
        while True:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                end = cr
                if cr + 1 < len(buffer):
                    step = 2 if buffer[cr + 1] == 0x0A else 1
                else:
                    step = 1
                    self._skip_lf = True
            else:
                end, step = lf, 1
            event = self._line(bytes(buffer[start:end]))
            if event is not None:
                events.append(event)
            start = end + step
        del buffer[:start]
        if len(buffer) + self._size > self._max:
            raise EventTooLarge(f"an event of more than {self._max} bytes")
        return events

    def _line(self, line: bytes) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        self._seen = True
        if name == b"data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self._max:
                raise EventTooLarge(f"an event of more than {self._max} bytes")
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        if not self._seen:
            return None
        event = Event(self._event or "message", b"\n".join(self._data), self._id, self._retry)
        self._data = []
        self._size = 0
        self._event = ""
        self._id = None
        self._retry = None
        self._seen = False
        return event


def to_line(payload: bytes) -> bytes:
    """One JSON-RPC line (ending in ``\\n``) from a JSON body or an event's data; b"" if it holds only space."""
    payload = payload.strip(b" \t\r\n")
    if not payload:
        return b""
    if b"\n" in payload or b"\r" in payload:
        payload = payload.replace(b"\r\n", b" ").replace(b"\n", b" ").replace(b"\r", b" ")
    return payload + b"\n"
