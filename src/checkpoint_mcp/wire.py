"""Pure JSON-RPC line handling: classify a line, edit one member in place, build reply lines. No I/O.

MCP over stdio is newline-delimited JSON. The relay forwards the original bytes of every line; this module
parses a line only to say what it is. When the proxy must change a message (the server identity in the
handshake, the journal's ``_meta`` on a tools/call result), ``set_member`` splices the new value into the
original text, so every other byte of the message, odd number spellings and unknown fields included, is kept.

Every line is judged on its own and nothing here fails on a hostile one: a line nested too deeply for the JSON
parser still yields its envelope (``Message.deep``), and every reply line can be encoded, whatever its id holds.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_WS_CHARS = " \t\n\r"
_decoder = json.JSONDecoder()
_decode = _decoder.decode  # what json.loads runs for a str
# The C-accelerated scanners behind json.loads; typeshed does not declare them.
_scan_value: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class Kind(enum.Enum):
    """What a line is, as far as routing is concerned."""

    REQUEST = "request"  # has "method" and "id": the peer expects exactly one response
    NOTIFICATION = "notification"  # has "method", no "id"
    RESPONSE = "response"  # has "id" and "result" or "error", no "method"
    BATCH = "batch"  # a JSON array (JSON-RPC batch; removed from MCP in 2025-06-18)
    OTHER = "other"  # valid JSON that is none of the above


class WireParseError(ValueError):
    """The line is not valid JSON (or not UTF-8)."""


class _TooDeep:
    """Stands for a member nested too deeply to parse (see ``Message.deep``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "TOO_DEEP"


TOO_DEEP: Final = _TooDeep()
"""The value of a member of ``Message.body`` that was nested too deeply for the JSON parser."""

JOURNAL_META: Final = "checkpoint/journal"
"""The result ``_meta`` key under which every journaled result says ``{"workflow", "seq", "replayed"}`` (with
``"repeatOf"`` on a repeat answered with the original's result, and ``"approval"``, the request's id, on a call
that ran on an approval): what a client, a trace and the gateway's metrics read of a journaled answer."""

PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
"""The ``_meta`` key of a 2026-07-28 request that names its protocol version (no header needed to read it)."""


class Message(NamedTuple):
    """One classified line. ``body`` is the parsed value; ``id`` is meaningful only when ``has_id``.

    ``deep`` is True when the line is valid JSON nested too deeply for the parser (about 1,000 levels): its
    top-level members are parsed one by one and those still too deep are ``TOO_DEEP``.
    """

    kind: Kind
    body: Any
    method: str | None = None
    id: Any = None
    has_id: bool = False
    deep: bool = False

    @property
    def params(self) -> Any:
        """The ``params`` member, or None."""
        return self.body.get("params") if isinstance(self.body, dict) else None


def classify(line: bytes | str) -> Message:
    """Parse one line and say what kind of JSON-RPC message it is.

    Raises:
        WireParseError: the line is not valid JSON.
    """
    try:
        if type(line) is bytes and line[:1] == b"{" and line[1:2] != b"\x00":
            # What json.loads does with bytes that start this way (its encoding detection says UTF-8), minus the
            # detection and the argument checks.
            body = _decode(line.decode("utf-8", "surrogatepass"))
        else:
            body = json.loads(line)
    except RecursionError:
        return _classify_deep(line)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise WireParseError(str(exc)) from exc
    return _message(body)


def _message(body: Any, deep: bool = False) -> Message:
    if isinstance(body, list):
        return Message(Kind.BATCH, body, deep=deep)
    if not isinstance(body, dict):
        return Message(Kind.OTHER, body, deep=deep)
    has_id = "id" in body
    ident = body.get("id")
    method = body.get("method")
    if isinstance(method, str):
        return Message(Kind.REQUEST if has_id else Kind.NOTIFICATION, body, method, ident, has_id, deep)
    if has_id and ("result" in body or "error" in body):
        return Message(Kind.RESPONSE, body, None, ident, True, deep)
    return Message(Kind.OTHER, body, None, ident, has_id, deep)


def _classify_deep(line: bytes | str) -> Message:
    """Classify valid JSON too deep for the recursive parser: its envelope, member by member.

    Raises:
        WireParseError: the line is not valid JSON.
    """
    try:
        text = line.decode() if isinstance(line, bytes) else line
        start = _skip_ws(text, 0)
        end = _skip_ws(text, skip_value(text, start))
    except (ValueError, RecursionError) as exc:
        raise WireParseError(str(exc) or "invalid JSON") from exc
    if end != len(text):
        raise WireParseError(f"extra data at {end}")
    if text[start] != "{":
        return _message([] if text[start] == "[" else None, deep=True)
    members, _ = object_members(text, start)
    body: dict[str, Any] = {}
    for key, (value_start, value_end) in members.items():
        try:
            body[key] = json.loads(text[value_start:value_end])
        except RecursionError:
            body[key] = TOO_DEEP
    return _message(body, deep=True)


def skip_value(text: str, pos: int) -> int:
    """The index just after the JSON value starting at ``pos``, found without recursion (any depth).

    Raises:
        ValueError: there is no well-formed JSON value at ``pos``.
    """
    closers: list[str] = []
    while True:
        pos = _skip_ws(text, pos)
        char = text[pos : pos + 1]
        if char in ("{", "["):
            closers.append("}" if char == "{" else "]")
            pos = _skip_ws(text, pos + 1)
            if text[pos : pos + 1] != closers[-1]:
                if char == "{":
                    pos = _member_name(text, pos)
                continue  # the first value inside
            closers.pop()
            pos += 1
        else:
            try:
                _, pos = _scan_value(text, pos)  # a scalar: the scanner does not recurse for those
            except StopIteration as exc:
                raise ValueError(f"expected a value at {pos}") from exc
        pos, more = _after_value(text, pos, closers)
        if not more:
            return pos


def _after_value(text: str, pos: int, closers: list[str]) -> tuple[int, bool]:
    """Past the closing brackets after a value: (where the next value starts, True), or (the end, False).

    Raises:
        ValueError: neither a comma nor the expected bracket follows.
    """
    while closers:
        pos = _skip_ws(text, pos)
        char = text[pos : pos + 1]
        if char == ",":
            pos += 1
            return (_member_name(text, _skip_ws(text, pos)) if closers[-1] == "}" else pos), True
        if char != closers[-1]:
            raise ValueError(f"expected ',' or {closers[-1]!r} at {pos}")
        closers.pop()
        pos += 1
    return pos, False


def _member_name(text: str, pos: int) -> int:
    """Past ``"name":`` at ``pos`` (white space included).

    Raises:
        ValueError: no member name there.
    """
    if text[pos : pos + 1] != '"':
        raise ValueError(f"expected a member name at {pos}")
    _, pos = _scan_string(text, pos + 1)
    pos = _skip_ws(text, pos)
    if text[pos : pos + 1] != ":":
        raise ValueError(f"expected ':' at {pos}")
    return pos + 1


def id_key(ident: Any) -> tuple[str, Any] | None:
    """A hashable key for a JSON-RPC id, or None if the value cannot be one.

    An id is a string, a number or null (JSON-RPC 2.0). Equal numbers are the same id, however they are
    spelled (``1``, ``1.0``, ``1e0``: many servers answer ``1.0`` with ``1``); strings and numbers stay apart.
    Objects, arrays, booleans and non-finite numbers are not ids.
    """
    kind = type(ident)
    if kind is str:
        return ("s", ident)
    if kind is int:
        return ("n", ident)  # 1 == 1.0 and hash(1) == hash(1.0): equal numbers share the key
    if kind is float:
        return ("n", ident) if math.isfinite(ident) else None
    if ident is None:
        return ("null", None)
    return None


def _compact_encoder(sort_keys: bool) -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)``, same bytes, without
    building an encoder per call: the C encoder is made once, with no table of the containers being encoded (that
    table only turns a circular value's ``RecursionError`` into a ``ValueError``; JSON read from a line is never
    circular)."""
    default = json.JSONEncoder().default
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # typeshed does not declare it
    if make is None:  # an interpreter without the C accelerator: json.dumps itself
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys).encode
    encoder = make(None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, True)

    def encode(value: Any) -> str:
        return "".join(encoder(value, 0))

    return encode


compact_json = _compact_encoder(sort_keys=False)
"""``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``, made faster (see ``dumps``)."""
sorted_json = _compact_encoder(sort_keys=True)
"""The same with sorted keys (the canonical form of ``signature.canonical_json``'s fast path)."""


def encode(obj: Any) -> bytes:
    """Serialise one message as a compact JSON line (a lone surrogate is written as its ``\\u`` escape)."""
    return dumps(obj).encode() + b"\n"


def dumps(obj: Any) -> str:
    """Compact JSON text of a value (no newline) that always encodes as UTF-8.

    Characters are written as themselves, except when the value holds a lone surrogate (a JSON string may
    escape one; UTF-8 cannot carry it): then the text is ASCII with ``\\u`` escapes, which reads back the same.
    """
    text = compact_json(obj)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return json.dumps(obj, separators=(",", ":"))
    return text


def error_line(ident: Any, error: dict[str, Any]) -> bytes:
    """A JSON-RPC error response line."""
    return encode({"jsonrpc": "2.0", "id": ident, "error": error})


def raw_response_line(ident: Any, member: str, value_text: str) -> bytes:
    """A response line whose ``result`` or ``error`` is given as JSON text, kept byte for byte."""
    return f'{{"jsonrpc":"2.0","id":{dumps(ident)},"{member}":{value_text}}}\n'.encode()


def _skip_ws(text: str, pos: int) -> int:
    if pos >= len(text) or text[pos] not in _WS_CHARS:  # the usual case (compact JSON): no regex
        return pos
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def object_members(text: str, pos: int) -> tuple[dict[str, tuple[int, int]], int]:
    """Spans of the members of the JSON object starting at ``pos``: key -> (value start, value end).

    Also returns the index just after the opening brace, where a new member can be inserted.

    Raises:
        ValueError: there is no well-formed object at ``pos``.
    """
    pos = _skip_ws(text, pos)
    if text[pos : pos + 1] != "{":
        raise ValueError(f"expected an object at {pos}")
    inside = pos + 1
    members: dict[str, tuple[int, int]] = {}
    pos = _skip_ws(text, inside)
    if text[pos : pos + 1] == "}":
        return members, inside
    while True:
        if text[pos : pos + 1] != '"':
            raise ValueError(f"expected a member name at {pos}")
        key, pos = _scan_string(text, pos + 1)
        pos = _skip_ws(text, pos)
        if text[pos : pos + 1] != ":":
            raise ValueError(f"expected ':' at {pos}")
        start = _skip_ws(text, pos + 1)
        try:
            _, end = _scan_value(text, start)
        except StopIteration as exc:
            raise ValueError(f"expected a value at {start}") from exc
        except RecursionError:
            end = skip_value(text, start)
        members[key] = (start, end)
        pos = _skip_ws(text, end)
        delimiter = text[pos : pos + 1]
        if delimiter == "}":
            return members, inside
        if delimiter != ",":
            raise ValueError(f"expected ',' or '}}' at {pos}")
        pos = _skip_ws(text, pos + 1)


_W = r"[ \t\n\r]*"
_PLAIN_STRING = r'"[^"\\\x00-\x1f]*"'  # a JSON string without escapes
_INTEGER = r"-?(?:0|[1-9][0-9]*)"
_ENVELOPE_MEMBER = rf'"(?:jsonrpc|id)"{_W}:{_W}(?:{_PLAIN_STRING}|{_INTEGER})'
_RESULT_HEAD = re.compile(rf'\{{{_W}(?:{_ENVELOPE_MEMBER}{_W},{_W})*"result"{_W}:{_W}')
_RESULT_TAIL = re.compile(rf"(?:{_W},{_W}{_ENVELOPE_MEMBER})*{_W}\}}")


def result_span(text: str) -> tuple[int, int] | None:
    """The span of the ``result`` member of the JSON object ``text`` (``object_members(text, 0)["result"]``), or
    None if it has none.

    A response written the usual way (``jsonrpc`` and ``id`` around one ``result``, whatever the white space and
    order) is read by two regular expressions and one scan of the result; anything else by ``object_members``.

    Raises:
        ValueError: ``text`` is not a JSON object.
    """
    head = _RESULT_HEAD.match(text)
    if head is not None:
        start = head.end()
        try:
            _, end = _scan_value(text, start)
        except (StopIteration, ValueError, RecursionError):
            pass  # not a value there, or a deep one: the member scan says what it is
        else:
            if _RESULT_TAIL.match(text, end) is not None:
                return start, end
    members, _ = object_members(text, 0)
    return members.get("result")


_REPLY_HEAD = re.compile(
    rf'\{{{_W}"jsonrpc"{_W}:{_W}"2\.0"{_W},{_W}"id"{_W}:{_W}'
    rf'(?:(-?[1-9][0-9]{{0,15}}|0)|"([^"\\\x00-\x1f]{{0,200}})"){_W},{_W}"result"{_W}:{_W}'
)
_REPLY_END = re.compile(rf"{_W}\}}{_W}")


class UsualResult(NamedTuple):
    """A result response read by ``usual_result``: what ``classify`` and ``result_span`` would say of it."""

    id: int | str
    result: Any
    span: tuple[int, int]  # of the result's text


def usual_result(text: str) -> UsualResult | None:
    """The id, the result and the result's span of a result response written the usual way, from one scan of its
    result; None for any other spelling (classify it, then ``result_span``).

    The usual way: ``jsonrpc`` ``"2.0"``, then an ``id`` that is an integer of at most 16 digits or a string
    without escapes, then ``result`` and nothing after it, with any JSON white space between the tokens. Only
    then is the one parse of the result all the parse there is: nothing else in the line can hold a duplicate
    member or a value ``json.loads`` would refuse.
    """
    head = _REPLY_HEAD.match(text)
    if head is None:
        return None
    start = head.end()
    try:
        result, end = _scan_value(text, start)
    except (StopIteration, ValueError, RecursionError):
        return None  # not a value there, or a deep one: the slow path says what it is
    if _REPLY_END.fullmatch(text, end) is None:
        return None
    number, string = head.groups()
    return UsualResult(int(number) if number is not None else string, result, (start, end))


_ID_HEAD = re.compile(rf'\{{{_W}(?:"(?:jsonrpc|method)"{_W}:{_W}{_PLAIN_STRING}{_W},{_W})*"id"{_W}:{_W}')
_ID_VALUE = re.compile(rf"{_PLAIN_STRING}|{_INTEGER}(?![0-9.eE])")
_MEMBER_END = re.compile(rf"{_W}[,}}]")


def id_span(text: str) -> tuple[int, int] | None:
    """The span of the top-level ``id`` member of the JSON object ``text`` (``object_members(text, 0)["id"]``),
    or None if it has none.

    A message written the usual way (``jsonrpc`` and ``method`` before an ``id`` that is a plain string or an
    integer, and no other ``"id"`` anywhere, in any spelling) is read by two regular expressions; anything else,
    a duplicate member included, by ``object_members``, whose last duplicate wins as it does for ``json.loads``.

    Raises:
        ValueError: ``text`` is not a JSON object.
    """
    head = _ID_HEAD.match(text)
    if head is not None and text.count('"id"') == 1 and "\\u" not in text:
        value = _ID_VALUE.match(text, head.end())
        if value is not None and _MEMBER_END.match(text, value.end()) is not None:
            return value.span()
    members, _ = object_members(text, 0)
    return members.get("id")


def with_id(text: str, value_text: str) -> tuple[str | None, str]:
    """``text`` with its top-level ``id`` member's value replaced by ``value_text`` (every other byte unchanged),
    and the exact text of the value it replaced; ``(None, text)`` if there is no ``id``.

    Raises:
        ValueError: ``text`` is not a JSON object.
    """
    span = id_span(text)
    if span is None:
        return None, text
    start, end = span
    return text[start:end], f"{text[:start]}{value_text}{text[end:]}"


def member_text(text: str, path: Sequence[str]) -> str | None:
    """The exact JSON text of the member at ``path`` (object keys from the top), or None if absent."""
    pos = 0
    span: tuple[int, int] | None = None
    for key in path:
        try:
            members, _ = object_members(text, pos)
        except ValueError:
            return None
        span = members.get(key)
        if span is None:
            return None
        pos = span[0]
    return text[span[0] : span[1]] if span else None


def set_member(text: str, path: Sequence[str], value_text: str) -> str:
    """Return ``text`` with the member at ``path`` set to ``value_text``; every other byte is unchanged.

    Missing intermediate objects are created; a non-object intermediate is replaced by an object.

    Raises:
        ValueError: ``text`` is not a JSON object.
    """
    return _set(text, 0, list(path), value_text)


def _set(text: str, pos: int, path: list[str], value_text: str) -> str:
    members, inside = object_members(text, pos)
    key, rest = path[0], path[1:]
    span = members.get(key)
    if span is None:
        new_value = value_text
        for name in reversed(rest):
            new_value = f"{{{dumps(name)}:{new_value}}}"
        separator = "," if members else ""
        return f"{text[:inside]}{dumps(key)}:{new_value}{separator}{text[inside:]}"
    start, end = span
    if not rest:
        return f"{text[:start]}{value_text}{text[end:]}"
    if text[start] != "{":
        new_value = value_text
        for name in reversed(rest):
            new_value = f"{{{dumps(name)}:{new_value}}}"
        return f"{text[:start]}{new_value}{text[end:]}"
    inner = _set(text[start:end], 0, rest, value_text)
    return f"{text[:start]}{inner}{text[end:]}"
