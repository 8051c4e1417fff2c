"""Errors Checkpoint stored under its old codes, replayed under the new ones.

Checkpoint's own codes moved from -320NN to -310NN (``errors.MOVED_CODES``). The journal keeps a stored error's
text as it is (the hash chain covers its digest, and `journal verify` must stay clean), so an old code is mapped
on its way out, at replay.
"""

from __future__ import annotations

import json
from typing import Any

from checkpoint_mcp.errors import ERROR_CODES, MOVED_CODES
from checkpoint_mcp.wire import set_member


def current_code(code: Any, data: Any) -> Any:
    """The code an error Checkpoint stored under an old code carries today; any other code unchanged.

    An upstream may use the old -320NN codes for its own purposes: only an error whose ``data.reason`` is the one
    Checkpoint puts beside that code (``ErrorCode.reasons``) is Checkpoint's, and moves.
    """
    new = MOVED_CODES.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
    if new is None:
        return code
    reason = data.get("reason") if isinstance(data, dict) else None
    return new if reason in ERROR_CODES[new].reasons else code


def current_error(outcome: str) -> str:
    """A stored error as it is replayed: one Checkpoint stored under an old code (before the -310NN move) carries
    its new code, every other byte as stored; an upstream's own error is never changed.

    The journal keeps the stored text as it is (the hash chain covers its digest, and `journal verify` must stay
    clean), so the old code is mapped on its way out: the replay calls this.
    """
    if "-3208" not in outcome:  # the usual case: no JSON parse on the replay path
        return outcome
    try:
        error = json.loads(outcome)
    except ValueError:
        return outcome
    if not isinstance(error, dict):
        return outcome
    stored = error.get("code")
    code = current_code(stored, error.get("data"))
    return outcome if code == stored else set_member(outcome, ("code",), str(code))
