"""Lone surrogates on the session server's stdin: requests that hold one are answered, never dropped.

JSON may escape a lone surrogate (``"\\ud800"``), which no UTF-8 file can hold. The SDK's parser refuses such a
line outright, so the request behind it would never be answered. A thread therefore sits between the real
stdin and the SDK: a line holding a lone surrogate is re-written with U+FFFD in its place, and the strings that
held one are remembered by request id, so the tool refuses the request clearly and writes nothing
(``refusal``). Every other line passes through untouched.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a surrogate escape: the only way JSON text can hold one
_damaged: dict[str, list[str]] = {}  # request id (as the SDK's Context shows it) -> where the surrogates were
_lock = threading.Lock()


def guard_stdin() -> None:
    """Put the filter between the real stdin and fd 0 (which the SDK's stdio transport reads)."""
    real = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)
    threading.Thread(target=_pump, args=(real, write_end), name="stdin-guard", daemon=True).start()


def refusal(request_id: str) -> str | None:
    """The error text for a request whose strings held lone surrogates, or None (and forget it)."""
    with _lock:
        places = _damaged.pop(request_id, None)
    if not places:
        return None
    where = ", ".join(places[:3]) + (" …" if len(places) > 3 else "")
    return (
        f"{where} is not valid Unicode: it holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which a "
        "checkpoint file cannot store; nothing was saved"
    )


def _pump(source_fd: int, sink_fd: int) -> None:
    with os.fdopen(source_fd, "rb", buffering=1 << 16) as source:
        try:
            for line in source:
                _write_all(sink_fd, _repaired(line) if _ESCAPE.search(line) else line)
        except OSError:
            pass  # the reading side is gone: the server is stopping
        finally:
            os.close(sink_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _repaired(line: bytes) -> bytes:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line  # not JSON: the SDK answers that itself
    places: list[str] = []
    fixed = _fix(message, "", places)
    if not places:
        return line
    if isinstance(message, dict) and "id" in message and message.get("method") == "tools/call":
        arguments = "params.arguments."
        named = [p[len(arguments) :] if p.startswith(arguments) else p for p in places]
        with _lock:
            _damaged[str(message["id"])] = named
    return json.dumps(fixed, ensure_ascii=False).encode() + b"\n"


def _fix(value: Any, path: str, places: list[str]) -> Any:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            places.append(path or "the message")
            return _replaced(value)
        return value
    if isinstance(value, list):
        return [_fix(item, f"{path}[{index}]", places) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {
            _fix(key, path, places): _fix(item, f"{path}.{key}" if path else key, places) for key, item in value.items()
        }
    return value


def _replaced(text: str) -> str:
    return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)
