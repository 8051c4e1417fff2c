"""Verifying a workflow's hash chain, and the call rows it vouches for: pure functions over links and rows.

``verify_chain`` walks the links in the order they were stored and stops at the first broken one, naming it and
the kind of change that explains it:

- **edited**: the link's stored columns no longer give its hash (or a link was re-hashed, so the next one no
  longer follows it);
- **removed**: the next link follows a position that is not there (or the chain's first links are gone with no
  gc anchor vouching for their removal);
- **inserted**: a link that the next one skips, following the same predecessor as it does;
- **reordered**: a link stored before the one it follows;
- **unauthenticated**: with the audit key, a link written without it, in a chain keyed by then (someone who
  could write the database but not the key rebuilt it).

If the chain holds, the rows it implies (``chain.row_after``) are compared with the ``calls`` table as it is: a
row edited, removed or inserted by hand is named too. What the chain cannot show (its newest links removed
together with the rows they describe, or a whole chain rebuilt where no key is used) is said in docs/audit.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.chain import Link

ROW_FIELDS = ("tool", "arguments", "signature", "identity", "state", "outcome", "started_at", "finished_at", "key")


class Break(NamedTuple):
    """One place where the journal differs from what its chain says."""

    kind: str  # edited | removed | inserted | reordered | unauthenticated
    message: str
    link: int | None = None  # the events row id named
    n: int | None = None  # its position in the chain
    seq: int | None = None  # the call it concerns, if any

    def as_json(self) -> dict[str, Any]:
        """For ``verify --json``."""
        return {"kind": self.kind, "link": self.link, "n": self.n, "seq": self.seq, "message": self.message}


class ChainReport(NamedTuple):
    """What ``checkpoint journal verify`` found for one workflow."""

    workflow: str
    links: int
    start: str  # genesis | migration | gc | none
    head: str  # the newest link's hash (worth keeping elsewhere: it pins everything before it)
    keyed: int  # links made with the audit key
    unchecked: int  # keyed links not authenticated, for want of the key
    rows: int  # call rows checked against the chain
    breaks: tuple[Break, ...]

    @property
    def ok(self) -> bool:
        """True when nothing is broken."""
        return not self.breaks

    def as_json(self) -> dict[str, Any]:
        """For ``verify --json``."""
        return {
            "workflow": self.workflow,
            "ok": self.ok,
            "links": self.links,
            "start": self.start,
            "head": self.head,
            "keyed": self.keyed,
            "unchecked": self.unchecked,
            "rows": self.rows,
            "breaks": [b.as_json() for b in self.breaks],
        }


def _name(link: Link) -> str:
    what = f"{link.kind} of call #{link.seq}" if link.seq is not None else link.kind
    return f"link {chain.position(link.hash) or '?'} (events row {link.id}: {what} at {link.at})"


def _at(kind: str, link: Link, message: str) -> Break:
    return Break(kind, message, link.id, chain.position(link.hash), link.seq)


def _detail(link: Link) -> dict[str, Any]:
    try:
        value = json.loads(link.detail)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _anchors(links: Sequence[Link]) -> dict[str, int]:
    """The removed links that gc anchors vouch for: hash of the last link cut -> index of the anchor."""
    found: dict[str, int] = {}
    for index, link in enumerate(links):
        if link.kind == chain.GC:
            cut = _detail(link).get("cut")
            if isinstance(cut, dict) and isinstance(cut.get("link"), str):
                found[cut["link"]] = index
    return found


def _start(links: Sequence[Link]) -> tuple[str, dict[int, dict[str, Any]], Break | None]:
    """How the stored chain begins, the rows it starts from, or the break at its start."""
    first = links[0]
    if first.prev == "":
        return ("migration" if first.kind == chain.CHAIN_START else "genesis"), {}, None
    anchor = _anchors(links).get(first.prev)
    if anchor is not None:
        rows = _detail(links[anchor]).get("rows", {})
        return "gc", {int(seq): dict(row) for seq, row in rows.items()}, None
    before = chain.position(first.prev)
    message = (
        f"removed: the chain's first links are missing: {_name(first)} follows link {before}, "
        "which is not there, and no gc anchor vouches for its removal"
    )
    return "none", {}, _at("removed", first, message)


def _linkage(links: Sequence[Link], index: dict[str, int], i: int) -> Break | None:
    """Whether link ``i`` follows link ``i - 1``, and if not, the change that explains it."""
    link, before = links[i], links[i - 1]
    n, before_n = chain.position(link.hash), chain.position(before.hash)
    if link.prev == before.hash:
        if n is None or before_n is None or n == before_n + 1:
            return None
        return _at("edited", link, f"edited: {_name(link)} follows link {before_n} but claims position {n}")
    j = -1 if link.prev == "" else index.get(link.prev)
    pn = chain.position(link.prev)
    if j is not None and j > i:
        found = _at("reordered", link, f"reordered: {_name(link)} is stored before {_name(links[j])}, which it follows")
    elif j is not None and j < i - 1:
        intruder = links[j + 1]
        message = f"inserted: {_name(intruder)} is not part of the chain ({_name(link)} follows link {pn} directly)"
        found = _at("inserted", intruder, message)
    elif pn is not None and before_n is not None and pn == before_n:
        message = f"edited: {_name(before)} was changed and re-hashed: {_name(link)} follows another version of it"
        found = _at("edited", before, message)
    elif pn is not None and before_n is not None and pn > before_n:
        gone = f"link {before_n + 1}" if pn == before_n + 1 else f"links {before_n + 1} to {pn}"
        found = _at("removed", link, f"removed: {gone} between {_name(before)} and {_name(link)}")
    else:
        found = _at("inserted", before, f"inserted: {_name(before)} is not the link {_name(link)} follows")
    return found


def _content(links: Sequence[Link], i: int, key: bytes | None, keyed_since: int | None) -> Break | None:
    """Whether link ``i``'s columns still give its hash (under the key, if it was keyed)."""
    link = links[i]
    if chain.keyed(link.hash) and key is None:
        return None
    expected = chain.link_hash(link, key)
    if expected != link.hash:
        if i + 1 < len(links) and links[i + 1].prev == link.prev:
            return _at("inserted", link, f"inserted: {_name(link)} is skipped by the link after it")
        why = "does not authenticate under the audit key" if chain.keyed(link.hash) else "its hash does not match"
        return _at("edited", link, f"edited: {_name(link)} was changed after it was written ({why})")
    if key is not None and not chain.keyed(link.hash) and keyed_since is not None:
        return _at(
            "unauthenticated",
            link,
            f"unauthenticated: {_name(link)} was written without the audit key, in a chain keyed since "
            f"link {keyed_since} (rewritten by someone without the key?)",
        )
    return None


def replay_rows(links: Sequence[Link], start: dict[int, dict[str, Any]], upto: int | None = None) -> dict[int, Any]:
    """The call rows the links imply, from the rows the chain starts with (through link index ``upto``)."""
    rows = {seq: dict(row) for seq, row in start.items()}
    for link in links[: None if upto is None else upto + 1]:
        chain.row_after(rows, link, _detail(link))
    return rows


def _rows(expected: Mapping[int, Mapping[str, Any]], actual: Mapping[int, Mapping[str, Any]]) -> list[Break]:
    breaks: list[Break] = []
    for seq in sorted(set(expected) | set(actual)):
        want, have = expected.get(seq), actual.get(seq)
        if have is None and want is not None:
            message = (
                f"removed: call #{seq} ({want.get('state')}, {want.get('tool')}) is in the chain but its row is gone"
            )
            breaks.append(Break("removed", message, seq=seq))
        elif want is None and have is not None:
            message = f"inserted: call #{seq} ({have.get('state')}, {have.get('tool')}) has a row but no link"
            breaks.append(Break("inserted", message, seq=seq))
        elif want is not None and have is not None:
            fields = [f for f in ROW_FIELDS if want.get(f) != have.get(f)]
            if fields:
                told = ", ".join(
                    f"{f} is {have.get(f)!r}, the chain says {want.get(f)!r}"
                    if f not in ("arguments", "outcome")
                    else f"{f} differs from what the chain recorded"
                    for f in fields
                )
                breaks.append(Break("edited", f"edited: the row of call #{seq} was changed: {told}", seq=seq))
    return breaks


def verify_chain(
    workflow: str, links: Sequence[Link], rows: Mapping[int, Mapping[str, Any]], key: bytes | None
) -> ChainReport:
    """Walk ``workflow``'s links (in stored order), then check its call rows (seq -> ``chain.row_digest``)."""
    if not links:
        breaks: tuple[Break, ...] = ()
        if rows:
            message = f"removed: {len(rows)} call row(s) but no chain: its links were removed, or the rows inserted"
            breaks = (Break("removed", message, seq=min(rows)),)
        return ChainReport(workflow, 0, "none", "", 0, 0, len(rows), breaks)
    start, start_rows, broken = _start(links)
    index = {link.hash: i for i, link in enumerate(links)}
    keyed_since: int | None = None
    keyed_count = unchecked = 0
    for i, link in enumerate(links):
        if broken is not None:
            break
        if i > 0:
            broken = _linkage(links, index, i)
        elif chain.position(link.hash) != (chain.position(link.prev) or 0) + 1:
            broken = _at("edited", link, f"edited: {_name(link)} does not follow link {chain.position(link.prev)}")
        if broken is None:
            broken = _content(links, i, key, keyed_since)
        if chain.keyed(link.hash):
            keyed_count += 1
            unchecked += key is None
            if keyed_since is None:
                keyed_since = chain.position(link.hash)
    if broken is None and key is not None and keyed_count == 0:
        broken = Break(
            "unauthenticated",
            f"unauthenticated: no link of {workflow!r} is authenticated by the audit key "
            "(written without it, or rebuilt by someone without it)",
        )
    found = [broken] if broken is not None else _rows(replay_rows(links, start_rows), rows)
    return ChainReport(workflow, len(links), start, links[-1].hash, keyed_count, unchecked, len(rows), tuple(found))


def gc_anchor(
    links: Sequence[Link], removed: Sequence[int], before: str, key: bytes | None
) -> tuple[dict[str, Any], int | None]:
    """The detail of the anchor `gc` links after removing ``removed``, and the id of the last link it may cut.

    The links written before ``before`` are cut (a prefix of the chain: stored order, stopping at the first
    newer one); the anchor names the last of them and carries the rows they imply, so the chain that is left
    verifies on its own. A chain that does not verify is never cut: cutting it would hide the break.
    """
    detail: dict[str, Any] = {"removed": list(removed), "before": before, "cut": None}
    if not links:
        return detail, None
    start, start_rows, broken = _start(links)
    index = {link.hash: i for i, link in enumerate(links)}
    for i in range(len(links)):
        broken = broken or (_linkage(links, index, i) if i else None) or _content(links, i, key, None)
    if broken is not None:
        return detail, None
    last = -1
    while last + 1 < len(links) and links[last + 1].at < before:
        last += 1
    if last < 0:
        return detail, None
    rows = replay_rows(links, start_rows, upto=last)
    for seq in removed:
        rows.pop(seq, None)
    detail["cut"] = {"link": links[last].hash, "links": last + 1, "start": start}
    detail["rows"] = {str(seq): row for seq, row in sorted(rows.items())}
    return detail, links[last].id
