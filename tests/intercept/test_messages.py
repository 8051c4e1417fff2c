"""intercept/messages.py: a response's id read from its head says what the full parse says, in any spelling."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkpoint_mcp.intercept.messages import head_key
from checkpoint_mcp.wire import classify, id_key

_WS = st.text(alphabet=" \t\r\n", max_size=3)
_IDS = st.one_of(
    st.integers(-(10**18), 10**18),
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
)


@given(
    _IDS,
    st.sampled_from(["result", "error"]),
    st.lists(_WS, min_size=12, max_size=12),
    st.booleans(),
    st.sampled_from([(",", ":"), (", ", ": ")]),
)
def test_the_head_of_a_response_names_the_id_the_parse_finds_whatever_its_white_space(
    ident: object, member: str, ws: list[str], ascii_only: bool, separators: tuple[str, str]
) -> None:
    id_text = json.dumps(ident, ensure_ascii=ascii_only)
    value = json.dumps({"content": [{"type": "text", "text": "x"}], "k": ident}, separators=separators)
    tokens = ["{", '"jsonrpc"', ":", '"2.0"', ",", '"id"', ":", id_text, ",", f'"{member}"', ":", value, "}"]
    line = "".join(token + space for token, space in zip(tokens, [*ws, ""], strict=True)).encode()
    key = head_key(line)
    message = classify(line)
    if key is not None:
        assert key == id_key(message.id)
    plain_int = isinstance(ident, int) and len(str(abs(ident))) <= 16
    plain_str = isinstance(ident, str) and "\\" not in id_text
    if plain_int or plain_str:
        assert key is not None, "a usual head must be read without a parse"


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc": "2.0", "id": 1, "result": {}}',  # Python's json.dumps
        b'{ "jsonrpc" : "2.0" , "id" : 1 , "result" : {} }',
        b'{\t"jsonrpc":\t"2.0",\r"id":\n1,  "error": {}}',
    ],
)
def test_a_head_with_white_space_between_its_tokens_is_read(line: bytes) -> None:
    assert head_key(line) == ("n", 1)


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": 1, "jsonrpc": "2.0", "result": {}}',  # another order
        b'{"jsonrpc": "2.0", "id": 1.0, "result": {}}',
        b'{"jsonrpc": "2.0", "id": "a\\"b", "result": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        b'{"jsonrpc" "2.0", "id": 1, "result": {}}',
        b'{"jsonrpc": "2.0", "id": 1 "result": {}}',
        b'{"jsonrpc": "2.0",\x0b"id": 1, "result": {}}',  # not JSON white space
    ],
)
def test_a_head_spelled_another_way_is_left_to_the_parse(line: bytes) -> None:
    assert head_key(line) is None
