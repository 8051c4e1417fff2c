"""wire.py: classification, and single-member edits that keep every other byte."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkpoint_mcp.wire import (
    TOO_DEEP,
    Kind,
    WireParseError,
    classify,
    compact_json,
    id_key,
    id_span,
    member_text,
    object_members,
    raw_response_line,
    result_span,
    set_member,
    skip_value,
    sorted_json,
    usual_result,
    with_id,
)


@pytest.mark.parametrize(
    ("line", "kind", "method"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', Kind.REQUEST, "tools/call"),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', Kind.REQUEST, "x"),
        (b'{"jsonrpc":"2.0","method":"notifications/cancelled"}', Kind.NOTIFICATION, "notifications/cancelled"),
        (b'{"jsonrpc":"2.0","id":"a","result":{}}', Kind.RESPONSE, None),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}', Kind.RESPONSE, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"a"}]', Kind.BATCH, None),
        (b"42", Kind.OTHER, None),
        (b'{"jsonrpc":"2.0","id":4}', Kind.OTHER, None),
    ],
)
def test_lines_are_classified_by_their_members(line: bytes, kind: Kind, method: str | None) -> None:
    message = classify(line)
    assert message.kind is kind
    assert message.method == method


@pytest.mark.parametrize("line", [b"", b"{", b"not json", b'{"a":1}}', b"\xff\xfe{}"])
def test_a_line_that_is_not_json_raises_a_parse_error(line: bytes) -> None:
    with pytest.raises(WireParseError):
        classify(line)


def test_equal_numbers_are_one_id_and_strings_stay_apart() -> None:
    assert id_key(1) == id_key(1.0) == id_key(json.loads("1e0"))
    assert id_key(100) == id_key(json.loads("1e2"))
    assert id_key(1) != id_key("1")
    assert id_key(None) != id_key("null")


@pytest.mark.parametrize("ident", [True, False, {"a": 1}, [1], float("nan"), float("inf")])
def test_values_that_cannot_be_json_rpc_ids_have_no_key(ident: object) -> None:
    assert id_key(ident) is None


def test_set_member_replaces_one_value_and_keeps_every_other_byte() -> None:
    text = '{"jsonrpc":"2.0", "id":7,"result":{ "serverInfo" : {"name":"up","version":"1"}, "n":1.0E+2 } }'
    edited = set_member(text, ("result", "serverInfo", "name"), '"mine"')
    assert edited == text.replace('"name":"up"', '"name":"mine"')


def test_set_member_creates_missing_objects_at_the_front() -> None:
    text = '{"id":1,"result":{"content":[],"x":-0.0}}'
    edited = set_member(text, ("result", "_meta", "k"), '{"seq":1}')
    assert edited == '{"id":1,"result":{"_meta":{"k":{"seq":1}},"content":[],"x":-0.0}}'
    assert json.loads(edited)["result"]["_meta"] == {"k": {"seq": 1}}


def test_set_member_adds_a_key_to_an_existing_meta_object() -> None:
    text = '{"result":{"_meta":{"other":true},"v":1}}'
    assert set_member(text, ("result", "_meta", "k"), "2") == '{"result":{"_meta":{"k":2,"other":true},"v":1}}'


def test_set_member_into_an_empty_object() -> None:
    assert set_member("{}", ("a", "b"), "1") == '{"a":{"b":1}}'
    assert set_member('{"r": {}}', ("r", "k"), "true") == '{"r": {"k":true}}'


def test_set_member_replaces_a_non_object_on_the_path() -> None:
    assert set_member('{"r":{"_meta":null}}', ("r", "_meta", "k"), "1") == '{"r":{"_meta":{"k":1}}}'


def test_set_member_refuses_text_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="expected an object"):
        set_member("[1,2]", ("a",), "1")


def test_member_text_returns_the_exact_original_spelling() -> None:
    text = '{"id":1,"result":{"structuredContent":{"a":1.0,"b":1E+2},"isError":false}}'
    assert member_text(text, ("result",)) == '{"structuredContent":{"a":1.0,"b":1E+2},"isError":false}'
    assert member_text(text, ("result", "isError")) == "false"
    assert member_text(text, ("error",)) is None
    assert member_text(text, ("id", "x")) is None


def test_a_raw_response_line_embeds_the_stored_text_unchanged() -> None:
    line = raw_response_line("abc", "result", '{"n":1.10}')
    assert line == b'{"jsonrpc":"2.0","id":"abc","result":{"n":1.10}}\n'


def test_a_line_too_deep_for_the_parser_still_yields_its_envelope() -> None:
    deep = "[" * 5000 + "]" * 5000
    message = classify(f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"arguments":{deep}}}}}'.encode())
    assert (message.kind, message.method, message.id, message.deep) == (Kind.REQUEST, "tools/call", 7, True)
    assert message.params is TOO_DEEP
    assert member_text(f'{{"result":{deep},"id":1}}', ("id",)) == "1"


@pytest.mark.parametrize("line", ["[" * 5000 + "]" * 4999, "[" * 5000 + "]" * 5001, '{"a":' + "[" * 5000 + "}"])
def test_a_line_too_deep_for_the_parser_that_is_not_json_is_a_parse_error(line: str) -> None:
    with pytest.raises(WireParseError):
        classify(line.encode())


@pytest.mark.parametrize("text", ['{"a":[1,{"b":[]}],"c":"x"}', "[]", "[1, 2 ,[3]]", '"s"', '{ "k" : { } }'])
def test_skip_value_ends_where_the_parser_ends(text: str) -> None:
    assert skip_value(text + " tail", 0) == len(text)


def test_a_reply_line_to_a_lone_surrogate_id_is_valid_utf8() -> None:
    line = raw_response_line("\ud800", "result", "{}")
    assert json.loads(line) == {"jsonrpc": "2.0", "id": "\ud800", "result": {}}


@pytest.mark.parametrize(
    "value",
    [
        {"n": 7},
        {"b": [1, 2.5, -0.0, 1e300, None, True, False], "a": {"z": 'é\u2028"\\\n\x00', "y": {}}},
        {"k\u00e9y": "\ud83d\ude00", "lone": "\udc80", 1: "int key", "f": float("inf"), "g": float("nan")},
        [],
        "plain",
        12345678901234567890,
        {"deep": [[[{"x": [1]}]]]},
    ],
)
def test_the_prebuilt_encoders_write_exactly_what_json_dumps_writes(value: object) -> None:
    assert compact_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not (isinstance(value, dict) and any(not isinstance(k, str) for k in value)):
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        assert sorted_json(value) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","id":7,"result":{"a":1}}\n',
        '{"result":[1], "jsonrpc": "2.0", "id": "x"}',
        '{ "jsonrpc" : "2.0" , "id" : -3 , "result" : { "content" : [ ] } }',
        '{"jsonrpc":"2.0","id":7,"result":{"a":1},"result":2}',
        '{"jsonrpc":"2.0","id":7,"result":{"a":1},"extra":{"result":3}}',
        '{"jsonrpc":"2.0","id":1.5,"result":{"a":1}}',
        '{"jsonrpc":"2.0","id":"a\\"b","result":"\\"result\\":1"}',
        '{"res\\u0075lt":1,"jsonrpc":"2.0","id":1}',
        '{"jsonrpc":"2.0","id":1,"error":{"code":1}}',
        '{"jsonrpc":"2.0","id":1,"result":' + "[" * 3000 + "]" * 3000 + "}",
    ],
)
def test_result_span_finds_what_the_member_scan_finds(text: str) -> None:
    members, _ = object_members(text, 0)
    assert result_span(text) == members.get("result")


@pytest.mark.parametrize("text", ["[1]", '{"jsonrpc":"2.0","id":1,"result":}', ""])
def test_result_span_refuses_what_is_not_an_object(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected (an object|a value) at"):
        result_span(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":1}}',  # an "id" deeper down
        '{"jsonrpc":"2.0","id":"a","method":"m"}',
        '{"method":"m","params":{},"jsonrpc":"2.0","id":3}',  # the id last (the TypeScript SDK's order)
        '{ "jsonrpc" : "2.0" , "id" : -3 , "result" : {} }',
        '{"jsonrpc":"2.0","id":1,"id":2,"result":{}}',  # a duplicate: the last wins, as in json.loads
        '{"jsonrpc":"2.0","id":1,"result":{},"\\u0069d":2}',  # the same, its name escaped
        '{"jsonrpc":"2.0","id":1.5,"result":{}}',
        '{"jsonrpc":"2.0","id":1e3,"result":{}}',
        '{"jsonrpc":"2.0","id":null,"method":"m"}',
        '{"jsonrpc":"2.0","id":"a\\"b","method":"m"}',
        '{"jsonrpc":"2.0","method":"id","id":4}',
        '{"jsonrpc":"2.0","method":"notifications/x"}',  # no id
        '{"jsonrpc":"2.0","id":12345678901234567890123,"result":{}}',
    ],
)
def test_id_span_finds_what_the_member_scan_finds(text: str) -> None:
    members, _ = object_members(text, 0)
    assert id_span(text) == members.get("id")
    assert json.loads(text).get("id") == (json.loads(text[slice(*members["id"])]) if "id" in members else None)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
_KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "x", r"\u0069d", r"i\"d"])


@given(
    st.lists(st.tuples(_KEYS, st.one_of(_SCALARS, st.dictionaries(_KEYS, _SCALARS, max_size=3))), max_size=6),
    st.sampled_from(["", " ", "\n "]),
)
def test_id_span_agrees_with_the_member_scan_on_any_object(members: list[tuple[str, object]], space: str) -> None:
    # Raw member names (escapes kept as written), so duplicates and escaped spellings of "id" occur.
    body = f",{space}".join(f'"{key}"{space}:{space}{json.dumps(value)}' for key, value in members)
    text = "{" + space + body + space + "}"
    scanned, _ = object_members(text, 0)
    assert id_span(text) == scanned.get("id")
    original, replaced = with_id(text, '"alias"')
    if "id" in scanned:
        start, end = scanned["id"]
        assert (original, replaced) == (text[start:end], text[:start] + '"alias"' + text[end:])
        assert json.loads(replaced)["id"] == "alias"
    else:
        assert (original, replaced) == (None, text)


# Responses spelled every way JSON allows: white space between any two tokens, escapes, nesting, other orders,
# other members, duplicates. The fast path must say what the slow path says, or nothing.
_WS = st.text(alphabet=" \t\r\n", max_size=3)
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12,
)
_IDS = st.one_of(
    st.integers(-(10**18), 10**18).map(str),
    st.text(max_size=6).map(json.dumps),  # escapes included
    st.text(max_size=6).map(lambda text: json.dumps(text, ensure_ascii=False)),
    st.sampled_from(["-0", "1.5", "1e3", "null", "2.0"]),
)


def _usual_id(text: str) -> bool:
    """An id the fast path reads: an integer of at most 16 digits, or a string of at most 200 without escapes."""
    if text.startswith('"'):
        return "\\" not in text and len(text) <= 202
    digits = text.removeprefix("-")
    return digits.isdigit() and len(digits) <= 16 and (text == "0" or not digits.startswith("0"))


@st.composite
def _responses(draw: st.DrawFn) -> tuple[str, bool]:
    """A response's text, and whether it is spelled the usual way (what ``usual_result`` must read)."""
    indent = draw(st.sampled_from([None, 1, "\t"]))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    value = json.dumps(draw(_JSON), indent=indent, separators=separators, ensure_ascii=draw(st.booleans()))
    ident = draw(_IDS)
    member = draw(st.sampled_from(['"result"', '"result"', '"error"', '"res\\u0075lt"']))  # names as JSON text
    members = [('"jsonrpc"', '"2.0"'), ('"id"', ident), (member, value)]
    extra = draw(st.lists(st.tuples(st.sampled_from(['"x"', '"id"', '"result"', '"jsonrpc"']), _IDS), max_size=2))
    spelled = draw(st.permutations(members + extra)) if draw(st.booleans()) else members + extra
    ws = [draw(_WS) for _ in range(4 * len(spelled) + 2)]
    body = ",".join(
        f"{ws[4 * n]}{key}{ws[4 * n + 1]}:{ws[4 * n + 2]}{text}{ws[4 * n + 3]}" for n, (key, text) in enumerate(spelled)
    )
    usual = not extra and spelled == members and member == '"result"' and _usual_id(ident) and ident != "-0"
    return "{" + body + "}" + ws[-1], usual


@given(_responses())
def test_the_usual_result_fast_path_says_what_the_slow_path_says(response: tuple[str, bool]) -> None:
    text, usual = response
    fast = usual_result(text)
    if usual:
        assert fast is not None, "a usual spelling must take the fast path"
    if fast is None:
        return
    body = json.loads(text)
    assert body == {"jsonrpc": "2.0", "id": fast.id, "result": fast.result}
    assert type(fast.id) is type(body["id"])
    assert fast.span == result_span(text) == object_members(text, 0)[0]["result"]
    assert json.loads(text[slice(*fast.span)]) == body["result"]
