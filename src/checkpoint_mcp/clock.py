"""Time as Checkpoint writes and reads it: the journal's timestamps, and durations, in one place.

A **timestamp** is ISO 8601 UTC text with milliseconds (``2026-12-04T12:00:00.123Z``), as the journal stores it in
both databases, where such texts compare as strings. A **duration** is written as a number and a unit (``s``,
``m``, ``h``, ``d``, ``w``) or a sum of them (``"90s"``, ``"24h"``, ``"1d12h"``): ``parse_duration`` reads it (a
policy's window, `journal gc --older-than`), ``duration_text`` writes one exactly as a person would write it back
(``86400`` is ``24h``, ``604800`` is ``7d``), and ``age_text`` says how long ago something happened, rounded for a
reader (``3725`` seconds is ``1h 2m``). Pure; the only clock read is ``time.time`` and ``datetime.now``.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from checkpoint_mcp.errors import UsageError

_DURATION: Final = re.compile(r"(\d+)([smhdw])")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SECOND: list[Any] = [-1, ""]


def utc_now() -> str:
    """The current time as the journal stores it (ISO 8601 UTC, milliseconds)."""
    now = time.time()
    second = int(now)
    if second != _SECOND[0]:
        _SECOND[0], _SECOND[1] = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return f"{_SECOND[1]}.{int((now - second) * 1000):03d}Z"


def stamp(moment: datetime) -> str:
    """``moment`` as the journal stores a time."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_before(seconds: float | timedelta, now: datetime | None = None) -> str:
    """The journal's timestamp of ``seconds`` before ``now`` (default: the current time)."""
    age = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
    return stamp((now or datetime.now(UTC)) - age)


def iso_after(moment: str, seconds: float) -> str:
    """The journal's timestamp of ``seconds`` after the journal's timestamp ``moment``."""
    return stamp(parse_time(moment) + timedelta(seconds=seconds))


def parse_time(text: str) -> datetime:
    """A journal timestamp (or any ISO 8601 time with a zone, ``Z`` included) as an aware datetime.

    Raises:
        ValueError: the text is not such a time.
    """
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def seconds_since(text: str | None) -> float | None:
    """Seconds from the journal's timestamp ``text`` to now; None when there is none or it cannot be read."""
    if not text:
        return None
    try:
        then = parse_time(text)
    except ValueError:
        return None
    return (datetime.now(UTC) - then).total_seconds()


def parse_duration(text: Any, where: str = "", *, zero: bool = False) -> float:
    """A duration (``"90s"``, ``"30m"``, ``"24h"``, ``"7d"``, ``"2w"``, ``"1d12h"``) or a number, in seconds.

    ``where`` names the file, table and key (or the flag) the text came from, for the error; ``zero``: a duration
    of zero is accepted (`journal gc --older-than 0s`), else it must be more than zero.

    Raises:
        UsageError: not such a duration, or out of range.
    """
    at = f"{where}: " if where else ""
    if isinstance(text, bool) or not isinstance(text, int | float | str):
        raise UsageError(f'{at}must be a duration such as "24h", "30m", "90s" (got {_kind(text)})')
    if isinstance(text, str):
        compact = text.replace(" ", "").lower()
        parts = _DURATION.findall(compact)
        if not parts or "".join(n + u for n, u in parts) != compact:
            raise UsageError(
                f"{at}cannot read duration {text!r}: use a number and a unit (s, m, h, d, w), e.g. 90s, 30m, 24h, 1d12h"
            )
        seconds = float(sum(int(n) * _UNITS[u] for n, u in parts))
    else:
        seconds = float(text)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        raise UsageError(f"{at}the duration must be more than zero (got {text!r})")
    return seconds


def duration_text(seconds: float) -> str:
    """A duration as a person writes it: the largest unit that divides it exactly (days from two on, so one day
    reads ``24h``): ``86400`` is ``24h``, ``604800`` is ``7d``, ``5400`` is ``90m``, ``90`` is ``90s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit == "d" else 1) and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def age_text(seconds: float) -> str:
    """How long ago, rounded down for a reader, in at most two adjacent units: ``less than a second``, ``14s``,
    ``3m 20s``, ``1h 2m``, ``2d 3h``, ``1h``."""
    whole = int(max(0.0, seconds))
    if whole < 1:
        return "less than a second"
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    for index, (unit, size) in enumerate(units):
        if whole >= size:
            text = f"{whole // size}{unit}"
            if index + 1 < len(units):
                smaller, step = units[index + 1]
                rest = (whole % size) // step
                if rest:
                    text += f" {rest}{smaller}"
            return text
    return "less than a second"


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)
