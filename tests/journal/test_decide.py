"""The decision table of spec §3.4, as one pure function."""

from __future__ import annotations

import pytest

from checkpoint_mcp.journal.base import Diverge, InDoubtAt, Proceed, Replay, decide
from checkpoint_mcp.journal.records import CallRecord, CallState


def row(state: CallState, signature: str = "sig-a") -> CallRecord:
    return CallRecord("wf", 1, "tool", "{}", signature, state, None, "2026-01-01T00:00:00.000Z", None)


@pytest.mark.parametrize(
    ("record", "signature", "expected"),
    [
        (None, "sig-a", Proceed),
        (row(CallState.COMPLETED), "sig-a", Replay),
        (row(CallState.COMPLETED), "sig-b", Diverge),
        (row(CallState.FAILED), "sig-a", Replay),
        (row(CallState.FAILED), "sig-b", Diverge),
        (row(CallState.PENDING), "sig-a", InDoubtAt),
        (row(CallState.PENDING), "sig-b", InDoubtAt),
    ],
)
def test_decide_follows_the_table(record: CallRecord | None, signature: str, expected: type) -> None:
    decision = decide(record, signature)
    assert type(decision) is expected
    if record is not None:
        assert decision.record is record  # type: ignore[union-attr]


def test_timestamps_are_iso_8601_utc_with_milliseconds() -> None:
    import re
    from datetime import UTC, datetime

    from checkpoint_mcp.clock import utc_now

    stamp = utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - parsed).total_seconds()) < 5
