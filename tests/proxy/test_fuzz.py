"""Property-based fuzzing of the client's side (Hypothesis): valid calls among hostile lines, in random chunkings.

One journaling proxy serves every example (ids and arguments never repeat, so examples cannot see each other).
The invariants, after each example:

* every request gets exactly one answer (requests whose id is unusable get theirs with id null);
* no PENDING row exists for a call the upstream never saw: every row is COMPLETED and the upstream recorded it;
* a valid call's outcome does not depend on its neighbours: it ran once, upstream, and got its own result.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

from support import ProxyProcess, effects_proxy, journal_calls, read_effects

_counter = itertools.count(1)


class Item(NamedTuple):
    """One line to send, and the answer it must get: (id, error code or None for a result), or no answer."""

    line: bytes
    answer: tuple[Any, int | None] | None
    marker: str | None = None  # a valid call's unique argument, by which the upstream's record is found


def _call(ident: Any, marker: str, extra: dict[str, Any] | None = None) -> bytes:
    params = {"name": "send_quiet", "arguments": {"m": marker}, **(extra or {})}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}).encode()


def valid(kind: str) -> Item:
    n = next(_counter)
    marker = f"m{n}-{uuid.uuid4().hex[:6]}"
    if kind == "keyed":
        return Item(_call(n, marker, {"_meta": {"checkpoint_key": marker}}), (n, None), marker)
    if kind == "standard key":
        return Item(_call(n, marker, {"idempotencyKey": marker}), (n, None), marker)
    if kind == "float id":
        return Item(_call(float(n), marker), (n, None), marker)
    if kind == "lone surrogate id":
        return Item(_call(f"\ud800{n}", marker), (f"\ud800{n}", None), marker)
    return Item(_call(n, marker), (n, None), marker)


_TOOLS_CALL = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "send_quiet", "arguments": {}}}
_DEEP = "[" * 999 + "]" * 999
_HOSTILE: dict[str, Any] = {
    "object id": lambda n: (json.dumps({**_TOOLS_CALL, "id": {"n": n}}).encode(), (None, INVALID_REQUEST)),
    "array id": lambda n: (
        json.dumps({"jsonrpc": "2.0", "id": [n], "method": "ping"}).encode(),
        (None, INVALID_REQUEST),
    ),
    "boolean id": lambda n: (json.dumps({**_TOOLS_CALL, "id": True}).encode(), (None, INVALID_REQUEST)),
    "sequence 2**70": lambda n: (_call(n, "never", {"_meta": {"checkpoint_seq": 2**70}}), (n, INVALID_PARAMS)),
    "sequence 2**63": lambda n: (_call(n, "never", {"_meta": {"checkpoint_seq": 2**63}}), (n, INVALID_PARAMS)),
    "nested 1,000 deep": lambda n: (
        f'{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"send_quiet","arguments":{{"a":{_DEEP}}}}}}}'.encode(),
        (n, INVALID_PARAMS),
    ),
    "lone surrogate argument": lambda n: (
        _call(n, "never").replace(b'"m": "never"', b'"m": "\\udc00"'),
        (n, INVALID_PARAMS),
    ),
    "not json": lambda n: (b'{"jsonrpc":"2.0","id":' + str(n).encode() + b',"method":', (None, PARSE_ERROR)),
    "not utf-8": lambda n: (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}', (None, PARSE_ERROR)),
    "not a message": lambda n: (b"[]" if n % 2 else b"42", (None, INVALID_REQUEST)),
    "batch": lambda n: (json.dumps([{**_TOOLS_CALL, "id": n}]).encode(), (None, INVALID_REQUEST)),
    "deep batch": lambda n: (
        f'[{{"jsonrpc":"2.0","id":{n},"method":"tools/call","a":{_DEEP}}}]'.encode(),
        (None, INVALID_REQUEST),
    ),
    # Notifications: no answer. A tools/call without an id is dropped (it could never be answered).
    "call without id": lambda n: (json.dumps(_TOOLS_CALL).encode(), None),
    "cancel of nothing": lambda n: (
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"x": n}}}).encode(),
        None,
    ),
}


def hostile(kind: str) -> Item:
    line, answer = _HOSTILE[kind](next(_counter))
    return Item(line, answer)


VALID = ["cursor", "keyed", "standard key", "float id", "lone surrogate id"]
HOSTILE = list(_HOSTILE)
items = st.lists(
    st.one_of(st.sampled_from(VALID).map(valid), st.sampled_from(HOSTILE).map(hostile)), min_size=1, max_size=8
)
cuts = st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), max_size=6)


class Fuzzed(NamedTuple):
    proxy: ProxyProcess
    journal: str
    effects: Path


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Fuzzed]:
    tmp_path = tmp_path_factory.mktemp("fuzz")
    if os.environ.get("CHECKPOINT_TEST_JOURNAL") == "postgres":
        journal = request.getfixturevalue("pg_server").create_database(f"t_{uuid.uuid4().hex[:16]}")
    else:
        journal = str(tmp_path / "j.db")
    with effects_proxy(journal, tmp_path) as proxy:
        yield Fuzzed(proxy, journal, tmp_path / "effects.jsonl")
        assert proxy.close() == 0


def _key(ident: Any) -> str:
    return json.dumps(float(ident) if isinstance(ident, int | float) else ident)


@settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=items, cuts=cuts)
def test_every_request_gets_one_answer_and_valid_calls_do_not_depend_on_their_neighbours(
    fuzzed: Fuzzed, items: list[Item], cuts: list[float]
) -> None:
    p = fuzzed.proxy
    data = b"".join(item.line + b"\n" for item in items)
    points = sorted({int(cut * len(data)) for cut in cuts} | {0, len(data)})
    for start, end in itertools.pairwise(points):
        if end > start:
            p.send_raw(data[start:end])
            time.sleep(0.001)  # let the proxy read each chunk on its own
    sentinel = f"sentinel-{next(_counter)}"
    p.send({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})

    answers: list[dict[str, Any]] = []
    while True:
        message = json.loads(p.recv_line(timeout=15))
        if message.get("id") == sentinel:
            break
        answers.append(message)
    # The sentinel is answered after every line before it was routed: what came before it is everything.
    expected = [item.answer for item in items if item.answer is not None]
    got = Counter((_key(a["id"]), a["error"]["code"] if "error" in a else None) for a in answers)
    late = len(expected) - len(answers)
    deadline = time.monotonic() + 15
    while late > 0 and time.monotonic() < deadline:  # journaled answers may follow the sentinel's
        message = json.loads(p.recv_line(timeout=15))
        got[(_key(message["id"]), message["error"]["code"] if "error" in message else None)] += 1
        late -= 1
    assert got == Counter((_key(ident), code) for ident, code in expected)

    seen = Counter(e["arguments"].get("m") for e in read_effects(fuzzed.effects))
    rows = journal_calls(fuzzed.journal, default_workflow_id(fuzzed.journal))
    assert all(row.state is CallState.COMPLETED for row in rows)
    assert {json.loads(row.arguments)["m"] for row in rows} == set(seen)
    for item in items:
        if item.marker is not None:
            assert seen[item.marker] == 1
