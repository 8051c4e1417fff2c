"""The chain's pure parts: link bytes are RFC 8785, and the verifier names each kind of change on synthetic chains."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_mcp.journal import audit, chain
from checkpoint_mcp.journal.chain import Event, Link
from checkpoint_mcp.signature import canonical_json

KEY = b"k"


@pytest.mark.parametrize(
    "detail",
    [
        {},
        {"b": 1, "a": [True, None, 1.5, "x"]},
        {"text": 'quote " backslash \\ tab \t nl \n bell \x07 é 😀 \u2028'},
        {"nested": {"z": {"y": [1, {"x": -0.0}]}}},
    ],
)
def test_link_bytes_are_the_rfc_8785_form_of_the_link_document(detail: dict[str, Any]) -> None:
    text = chain.canonical_text(detail)
    document = {"workflow": "w é", "n": 3, "seq": 7, "kind": "reserved", "detail": detail, "at": "t", "prev": "p"}
    assert chain.link_bytes("w é", 3, 7, "reserved", text, "t", "p") == canonical_json(document)


def test_a_detail_with_an_integer_beyond_2_53_is_stored_as_exact_json() -> None:
    assert chain.canonical_text({"id": 2**64, "a": 1}) == '{"a":1,"id":18446744073709551616}'


def make_chain(count: int, key: bytes | None = None) -> list[Link]:
    """``count`` links of workflow 'w': reserved/completed pairs of calls 1, 2, …"""
    events = [
        Event("w", "reserved" if i % 2 == 0 else "completed", i // 2 + 1, {"i": i}, f"2026-01-01T00:00:{i:02d}.000Z")
        for i in range(count)
    ]
    rows = chain.append(events, key, lambda workflows: dict.fromkeys(workflows, ""))
    return [Link(i + 1, row[0], row[1], row[2], row[3], row[4], row[5], row[6]) for i, row in enumerate(rows)]


def first(links: list[Link], key: bytes | None = None) -> audit.Break | None:
    report = audit.verify_chain("w", links, {}, key)
    link_breaks = [b for b in report.breaks if b.link is not None or b.kind == "unauthenticated"]
    return link_breaks[0] if link_breaks else None


def test_an_intact_chain_has_no_link_break() -> None:
    assert first(make_chain(6)) is None
    assert first(make_chain(6, KEY), KEY) is None


def test_each_kind_of_change_is_named_at_the_right_link() -> None:
    links = make_chain(8)
    edited = [*links]
    edited[3] = links[3]._replace(detail='{"i":99}')
    assert (first(edited).kind, first(edited).n) == ("edited", 4)  # type: ignore[union-attr]
    removed = links[:3] + links[4:]
    assert (first(removed).kind, first(removed).n) == ("removed", 5)  # type: ignore[union-attr]
    swapped = [*links]
    swapped[2], swapped[3] = links[3], links[2]
    assert (first(swapped).kind, first(swapped).n) == ("reordered", 4)  # type: ignore[union-attr]
    data = chain.link_bytes("w", 4, 9, "completed", "{}", "t", links[2].hash)
    intruder = Link(99, "w", 9, "completed", "{}", "t", links[2].hash, chain.seal(data, 4, None))
    inserted = [*links[:3], intruder, *links[3:]]
    assert (first(inserted).kind, first(inserted).link) == ("inserted", 99)  # type: ignore[union-attr]
    headless = links[2:]
    assert (first(headless).kind, first(headless).n) == ("removed", 3)  # type: ignore[union-attr]


def test_a_keyed_chain_rebuilt_without_the_key_is_unauthenticated_and_a_wrong_key_fails() -> None:
    assert first(make_chain(4, KEY), b"other").kind == "edited"  # type: ignore[union-attr]
    rebuilt = make_chain(4)
    assert first(rebuilt) is None
    assert first(rebuilt, KEY).kind == "unauthenticated"  # type: ignore[union-attr]


def test_a_chain_begun_without_the_key_is_pinned_by_a_keyed_link_from_its_first_keyed_writer() -> None:
    plain = make_chain(4)
    head = plain[-1].hash

    more = [Event("w", "reserved", 3, {"i": 4}, "2026-01-01T00:01:00.000Z")]
    rows = chain.append(more, KEY, lambda workflows: dict.fromkeys(workflows, head))
    assert [row[2] for row in rows] == [chain.KEYED, "reserved"]
    keyed = [Link(10 + i, *row) for i, row in enumerate(rows)]
    assert first([*plain, *keyed], KEY) is None  # the unkeyed links before the marker are accepted
    assert first([*plain, *keyed]) is None  # and without the key the links still chain
    forged = [*plain, keyed[0], make_chain(6)[-1]._replace(prev=keyed[0].hash)]
    assert first(forged, KEY).kind in ("edited", "unauthenticated")  # type: ignore[union-attr]


@pytest.mark.parametrize("key", [None, "k-1", 'odd "key" \\ \n'])
def test_the_hot_path_details_are_their_canonical_text(key: str | None) -> None:
    reserved = chain.reserved_detail("send é", '{"to":"a"}', "ab" * 32, key)
    expected = {"tool": "send é", "arguments": chain.text_digest('{"to":"a"}'), "signature": "ab" * 32, "key": key}
    assert reserved == chain.canonical_text(expected)
    assert chain.finished_detail(None) == chain.canonical_text({"outcome": None})
    assert chain.finished_detail("{}") == chain.canonical_text({"outcome": chain.text_digest("{}")})


def test_gc_never_cuts_a_chain_that_does_not_verify_even_when_only_its_newest_link_is_broken() -> None:
    links = make_chain(6)
    detail, cut = audit.gc_anchor(links, [1], "2099-01-01T00:00:00.000Z", None)
    assert cut == links[-1].id
    assert detail["cut"]["link"] == links[-1].hash
    broken = [*links[:-1], links[-1]._replace(detail='{"i":0}')]
    detail, cut = audit.gc_anchor(broken, [1], "2099-01-01T00:00:00.000Z", None)
    assert (cut, detail["cut"]) == (None, None)


@pytest.mark.parametrize("key", [None, KEY])
def test_append_seals_exactly_the_link_bytes_of_each_event_whatever_its_strings_hold(key: bytes | None) -> None:
    odd = 'w "q" \\ \t é 😀 \u2028'
    heads = {"plain": "", odd: 'sha256:41:not "quite" a hash \x01', "third": "sha256:7:ab"}
    events = [
        Event("plain", "reserved", 1, {"a": 1}, "2026-01-01T00:00:00.000Z"),
        Event(odd, "completed", 2, '{"outcome":null}', 'at "odd" \n'),
        Event("plain", "kind \\ odd", None, {}, "t"),
        Event("third", "failed", 3, {"x": "é"}, "t"),
        Event(odd, "resolved", 2, {"by": "me"}, "t"),
    ]
    rows = chain.append(events, key, lambda workflows: {w: heads[w] for w in workflows})
    expected_heads = dict(heads)
    for workflow, seq, kind, text, at, prev, sealed in rows:
        assert prev == expected_heads[workflow]
        n = (chain.position(prev) or 0) + 1
        assert sealed == chain.seal(chain.link_bytes(workflow, n, seq, kind, text, at, prev), n, key)
        expected_heads[workflow] = sealed
    kinds = [row[2] for row in rows]
    assert kinds.count(chain.KEYED) == (2 if key is not None else 0)  # the two unkeyed heads get pinned
