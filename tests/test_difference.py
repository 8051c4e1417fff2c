"""Readable differences between journaled and received arguments."""

from __future__ import annotations

from checkpoint_mcp.difference import MAX_LINES, json_difference


def test_changed_added_and_removed_members_each_get_a_line() -> None:
    old = {"to": "ann", "cc": ["x", "y"], "flags": {"urgent": True}}
    new = {"to": "eve", "cc": ["x"], "flags": {"urgent": True, "read": False}, "bcc": "z"}
    assert json_difference(old, new) == [
        'arguments.bcc: added "z"',
        'arguments.cc[1]: removed (was "y")',
        "arguments.flags.read: added false",
        'arguments.to: "ann" → "eve"',
    ]


def test_equal_values_have_no_difference_and_numbers_compare_by_value() -> None:
    assert json_difference({"a": 1, "b": [1.0]}, {"a": 1.0, "b": [1]}) == []
    assert json_difference({"a": True}, {"a": 1}) == ["arguments.a: true → 1"]


def test_long_values_and_many_lines_are_cut() -> None:
    lines = json_difference({"a": "x" * 500}, {"a": "y"})
    assert len(lines[0]) < 200
    many = json_difference({f"k{i}": i for i in range(50)}, {})
    assert len(many) == MAX_LINES
    assert many[-1].startswith("… and")
