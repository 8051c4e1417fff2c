"""A readable difference between two JSON values, for divergence errors and the operator's commands."""

from __future__ import annotations

import json
from typing import Any

MAX_VALUE_CHARS = 80
MAX_LINES = 20


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _walk(path: str, old: Any, new: Any, out: list[str], pointers: bool) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            child = f"{path}/{key.replace('~', '~0').replace('/', '~1')}" if pointers else f"{path}.{key}"
            if key not in new:
                out.append(f"{child}: removed (was {_show(old[key])})")
            elif key not in old:
                out.append(f"{child}: added {_show(new[key])}")
            else:
                _walk(child, old[key], new[key], out, pointers)
        return
    if isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            child = f"{path}/{index}" if pointers else f"{path}[{index}]"
            if index >= len(new):
                out.append(f"{child}: removed (was {_show(old[index])})")
            elif index >= len(old):
                out.append(f"{child}: added {_show(new[index])}")
            else:
                _walk(child, old[index], new[index], out, pointers)
        return
    # 1 and 1.0 are the same JSON number; True and 1 are not the same JSON value.
    if old != new or isinstance(old, bool) != isinstance(new, bool):
        out.append(f"{path}: {_show(old)} → {_show(new)}")


def json_difference(old: Any, new: Any, root: str = "arguments", *, pointers: bool = False) -> list[str]:
    """Lines such as ``arguments.to: "bob" → "eve"`` (with ``pointers``, JSON pointers under ``root``:
    ``/to: "bob" → "eve"``, as a policy's ``match`` names them), at most MAX_LINES of them; empty if equal."""
    out: list[str] = []
    _walk(root, old, new, out, pointers)
    if len(out) > MAX_LINES:
        out = [*out[: MAX_LINES - 1], f"… and {len(out) - MAX_LINES + 1} more differences"]
    return out
