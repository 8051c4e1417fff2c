"""Call signatures: RFC 8785 canonical JSON of name and arguments, SHA-256."""

from __future__ import annotations

import json

import pytest

from checkpoint_mcp.signature import call_signature, canonical_json


def test_key_order_whitespace_and_number_spelling_do_not_change_the_signature() -> None:
    a = json.loads('{"b": [1, 2.0, {"y": 1e2, "x": "é"}], "a": true}')
    b = json.loads('{"a":true,"b":[1.0,2,{"x":"\\u00e9","y":100}]}')
    assert call_signature("t", a) == call_signature("t", b)


def test_the_tool_name_and_every_argument_count() -> None:
    base = call_signature("send", {"to": "a"})
    assert call_signature("send2", {"to": "a"}) != base
    assert call_signature("send", {"to": "b"}) != base
    assert call_signature("send", {"to": "a", "cc": None}) != base
    assert call_signature("send", {"to": ["a"]}) != base


def test_the_signature_is_sha256_of_the_rfc8785_bytes() -> None:
    import hashlib

    jcs = b'{"arguments":{"a":1,"b":"x"},"name":"t"}'
    assert canonical_json({"name": "t", "arguments": {"b": "x", "a": 1.0}}) == jcs
    assert call_signature("t", {"b": "x", "a": 1}) == hashlib.sha256(jcs).hexdigest()


def test_integers_beyond_double_precision_keep_their_exact_value() -> None:
    big = 2**63 + 1
    assert call_signature("t", {"id": big}) != call_signature("t", {"id": big + 1})
    assert call_signature("t", {"id": big}) == call_signature("t", {"id": big})


def test_nan_is_not_json_and_is_refused() -> None:
    with pytest.raises(ValueError, match=r"(?i)nan|finite|float"):
        call_signature("t", {"x": float("nan")})
