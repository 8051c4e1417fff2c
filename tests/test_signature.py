"""Call signatures: RFC 8785 canonical JSON of name and arguments, SHA-256."""

from __future__ import annotations

import json
import random

import pytest
import rfc8785

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


def _random_value(rng: random.Random, depth: int = 0) -> object:
    alphabet = ["a", "Z", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", "\ufeff", " ", "/"]
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
    if kind == 1:
        return rng.choice([0, 1, -1, 2**53 - 1, -(2**53 - 1), rng.randrange(-(10**9), 10**9)])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.choice(["", "x", "ключ"])
    if kind in (4, 5):
        keys = [
            "".join(rng.choice("abcXYZ_-09~ ") for _ in range(rng.randrange(1, 4))) for _ in range(rng.randrange(5))
        ]
        return {k: _random_value(rng, depth + 1) for k in keys}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_the_fast_path_writes_exactly_the_rfc8785_bytes() -> None:
    rng = random.Random(8785)
    for _ in range(5000):
        value = {"name": "t", "arguments": _random_value(rng)}
        assert canonical_json(value) == rfc8785.dumps(value)


def test_values_outside_the_fast_path_still_use_rfc8785() -> None:
    for value in [{"x": 1.5}, {"x": [0.1, 1e21]}, {"é": 1}, {"k": "\ud800"}]:
        try:
            expected = rfc8785.dumps(value)
        except rfc8785.CanonicalizationError:
            with pytest.raises(ValueError, match=r"non-UTF-8"):
                canonical_json(value)
            continue
        assert canonical_json(value) == expected
