"""Checks of single lines that the interceptor needs, pure and without I/O: a well-formed tools/call, a batch
that holds one, lines repaired to UTF-8, a response's id read from its head, and internal-error replies."""

from __future__ import annotations

import logging
import re
from typing import Any

from checkpoint_mcp.refusals import INTERNAL_ERROR, InvalidCallParams
from checkpoint_mcp.signature import MAX_ARGUMENT_DEPTH
from checkpoint_mcp.wire import Kind, Message, WireParseError, classify, error_line, id_key

logger = logging.getLogger(__name__)

# The usual head of a response line: its id without a JSON parse, whatever JSON white space lies between its
# tokens (each space of the template; Python's json.dumps writes ", " and ": "); any other spelling takes the
# slow path.
_RESPONSE_HEAD = re.compile(
    rb'\{ "jsonrpc" : "2\.0" , "id" : (?:(-?[1-9][0-9]{0,15}|0)|"([^"\\]{0,200})") , "(?:result|error)" :'.replace(
        b" ", rb"[ \t\n\r]*"
    )
)


def head_key(line: bytes) -> tuple[str, Any] | None:
    """The ``id_key`` of a response line that starts the usual way, without parsing it; None otherwise."""
    head = _RESPONSE_HEAD.match(line)
    if head is None:
        return None
    number, string = head.groups()
    if number is not None:
        return ("n", int(number))
    try:
        return ("s", string.decode())
    except UnicodeDecodeError:
        return None


def valid_tools_call(message: Message) -> dict[str, Any]:
    """The params of a well-formed tools/call.

    Raises:
        InvalidCallParams: no params object, no tool name, or non-object arguments.
    """
    if message.deep:
        raise InvalidCallParams(
            f"invalid params: the tools/call is nested too deeply to be journaled (its arguments may nest at most "
            f"{MAX_ARGUMENT_DEPTH} levels)",
            {"reason": "too_deep"},
        )
    params = message.params
    if not isinstance(params, dict):
        raise InvalidCallParams("invalid params: tools/call needs a params object")
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidCallParams("invalid params: tools/call needs a non-empty string `name`")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise InvalidCallParams(f"invalid params: `arguments` of {name!r} must be an object")
    return params


def batch_has_tool_call(items: list[Any]) -> bool:
    return any(isinstance(item, dict) and item.get("method") == "tools/call" for item in items)


def utf8_lines(lines: list[bytes]) -> list[bytes]:
    """``lines``, with any line that is not valid UTF-8 repaired (U+FFFD for each bad byte)."""
    repaired: list[bytes] | None = None
    for index, line in enumerate(lines):
        if line.isascii():
            continue
        try:
            line.decode()
        except UnicodeDecodeError:
            logger.warning("the upstream sent a line that is not UTF-8; its bad bytes were replaced by U+FFFD")
            if repaired is None:
                repaired = list(lines)
            repaired[index] = line.decode(errors="replace").encode()
    return repaired if repaired is not None else lines


def request_key(ident: Any) -> tuple[str, Any]:
    """The ``id_key`` of a request id already checked to be one."""
    key = id_key(ident)
    assert key is not None
    return key


def internal_error_replies(lines: list[bytes]) -> list[bytes]:
    """An ``INTERNAL_ERROR`` for every request among ``lines`` (used when routing them failed unexpectedly)."""
    out: list[bytes] = []
    error = {"code": INTERNAL_ERROR, "message": "internal error in checkpoint; the request was not forwarded"}
    for line in lines:
        try:
            message = classify(line)
        except WireParseError:
            continue
        if message.kind is Kind.REQUEST:
            out.append(error_line(message.id if id_key(message.id) is not None else None, error))
    return out
