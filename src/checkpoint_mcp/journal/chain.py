"""The journal's hash chain: every event of a workflow is a link that carries the hash of the one before it.

An event is what happened to the journal (a call reserved, completed or failed, an operator's resolution, a gc,
the start of the chain at a migration, a policy's audit record). Its link is the RFC 8785 canonical JSON of
``{"workflow", "n", "seq", "kind", "detail", "at", "prev"}`` (``n`` counts the links of the chain from 1), and
its hash is SHA-256 of those bytes, or HMAC-SHA-256 under the operator's audit key (``--audit-key-env``),
written ``sha256:<n>:<hex>`` or ``hmac-sha256:<n>:<hex>``: a hash names the position of its link, so a verifier
can tell a link removed (a position skipped) from one edited (the position is there, the hash is not) or
inserted. The first link of a chain has ``prev`` empty; the first one after a gc's cut names the removed link it
followed, which the gc's anchor vouches for.

Events about a call carry digests of the call row's columns (never the arguments or results themselves: the
SHA-256 of their canonical JSON), so a verifier can rebuild what each row of ``calls`` must look like from the
chain alone (``row_after``) and catch a row edited, removed or inserted by hand even where the chain is intact.

This module is pure (bytes in, hashes out) except ``append``, which writes links inside the caller's
transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from checkpoint_mcp.signature import canonical_json

SHA256 = "sha256:"
HMAC_SHA256 = "hmac-sha256:"

CHAIN_START = "chain-start"
"""The first link of a chain that begins at a migration: ``rows`` holds the digest of every call row before it."""
KEYED = "keyed"
"""Written by the first keyed writer of a chain whose earlier links were unkeyed: from here on, all are keyed."""
GC = "gc"
"""An anchor left by ``checkpoint journal gc``: the rows it removed, and the links it cut from the chain's start."""

Execute = Callable[[str, Sequence[Any]], Any]


class Event(NamedTuple):
    """One event, before it is linked: what ``record_event`` and the unit of work queue."""

    workflow: str
    kind: str
    seq: int | None
    detail: Mapping[str, Any] | str  # a JSON object, or its canonical text already made (``canonical_text``)
    at: str


class Link(NamedTuple):
    """One stored event with its place in the chain (a row of ``events``)."""

    id: int
    workflow: str
    seq: int | None
    kind: str
    detail: str  # canonical JSON text
    at: str
    prev: str
    hash: str


def text_digest(text: str | None) -> str | None:
    """The digest of a stored text column (arguments, outcome): hex SHA-256 of its UTF-8 bytes, None for NULL.

    The bytes as stored, not a canonical form: hashing costs next to nothing on the hot path, whatever the size
    of a result, and `export` carries the stored texts so that its offline check recomputes the same digests.
    """
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_text(detail: Mapping[str, Any]) -> str:
    """The detail as stored: its RFC 8785 canonical JSON (integers beyond 2**53 kept exact, keys still sorted).

    Raises:
        ValueError: the detail is not JSON (see ``signature.canonical_json``).
    """
    data = canonical_json(dict(detail))
    return (data[len(_EXACT) :] if data.startswith(_EXACT) else data).decode()


_EXACT = b"exact:"


_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


def _string(text: str) -> str:
    """A JSON string as RFC 8785 writes it: only quote, backslash and control characters are escaped."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the usual case (hashes, timestamps, names), checked without a regex
    return f'"{text}"' if _ESCAPED.search(text) is None else json.dumps(text, ensure_ascii=False)


def link_bytes(workflow: str, n: int, seq: int | None, kind: str, detail_text: str, at: str, prev: str) -> bytes:
    """The canonical bytes a link's hash covers: the RFC 8785 form of ``{"at", "detail", "kind", "n", "prev",
    "seq", "workflow"}``, with ``detail_text`` (already canonical, see ``canonical_text``) spliced in as it is."""
    return (
        f'{{"at":{_string(at)},"detail":{detail_text},"kind":{_string(kind)},"n":{n},"prev":{_string(prev)},'
        f'"seq":{"null" if seq is None else seq},"workflow":{_string(workflow)}}}'
    ).encode("utf-8", "surrogatepass")


def seal(data: bytes, n: int, key: bytes | None) -> str:
    """The hash of the link at position ``n``: HMAC-SHA-256 under ``key``, or plain SHA-256 without one."""
    if key is None:
        return f"{SHA256}{n}:{hashlib.sha256(data).hexdigest()}"
    return f"{HMAC_SHA256}{n}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"


def keyed(link_hash: str) -> bool:
    """True for a hash made with the audit key."""
    return link_hash.startswith(HMAC_SHA256)


def position(link_hash: str) -> int | None:
    """The position a hash names (``sha256:<n>:<hex>``), 0 for the empty hash before a chain, None if malformed."""
    if not link_hash:
        return 0
    parts = link_hash.split(":")
    if len(parts) != 3 or parts[0] + ":" not in (SHA256, HMAC_SHA256) or not parts[1].isdigit():
        return None
    return int(parts[1])


def link_hash(link: Link, key: bytes | None) -> str | None:
    """What ``link``'s hash must be, recomputed from its stored columns (keyed links under ``key``); None when
    its stored hash is malformed or its detail is not JSON."""
    n = position(link.hash)
    if not n:
        return None
    try:
        detail = json.loads(link.detail)
        if not isinstance(detail, dict):
            return None
        data = link_bytes(link.workflow, n, link.seq, link.kind, canonical_text(detail), link.at, link.prev)
    except ValueError:
        return None
    return seal(data, n, key if keyed(link.hash) else None)


# ---- writing ----------------------------------------------------------------------------------------------

HEAD = "SELECT hash FROM events WHERE workflow_id = ? ORDER BY id DESC LIMIT 1"
INSERT_LINK = "INSERT INTO events (workflow_id, seq, kind, detail, at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"


def heads_by_query(execute: Execute) -> Callable[[Sequence[str]], dict[str, str]]:
    """Read chain heads one workflow at a time through ``execute`` (inside the caller's transaction)."""

    def heads(workflows: Sequence[str]) -> dict[str, str]:
        found = {}
        for workflow in workflows:
            row = execute(HEAD, (workflow,)).fetchone()
            found[workflow] = row[0] if row else ""
        return found

    return heads


class _Head:
    """A chain's newest link while ``append`` adds to it: its position and hash, and the JSON strings of the hash
    and the workflow as ``link_bytes`` writes them."""

    __slots__ = ("hash", "n", "quoted_hash", "quoted_workflow")

    def __init__(self, workflow: str, head: str) -> None:
        self.n = position(head) or 0
        self.hash = head
        self.quoted_hash = _string(head)
        self.quoted_workflow = _string(workflow)


def append(
    events: Sequence[Event], key: bytes | None, heads_of: Callable[[Sequence[str]], dict[str, str]]
) -> list[tuple[Any, ...]]:
    """Link ``events`` onto their workflows' chains; the rows to insert into ``events``.

    ``heads_of(workflows)`` (sorted) gives each chain's newest hash, read inside the transaction that will insert
    the rows; on PostgreSQL it first locks each workflow's row, so that concurrent writers to one chain take
    turns. A keyed writer appending to an unkeyed chain first links a ``keyed`` event, after which every link of
    the chain must be keyed.

    The bytes hashed are ``link_bytes``'s; this loop writes them itself (it runs for every journaled call): each
    workflow's quoted name and position are found once, and a hash this loop made needs no escaping.
    """
    heads = heads_of(sorted({event.workflow for event in events}))
    chains = {workflow: _Head(workflow, head) for workflow, head in heads.items()}
    rows: list[tuple[Any, ...]] = []
    sha256 = hashlib.sha256
    new_hmac = hmac.new
    prefix = SHA256 if key is None else HMAC_SHA256

    def link(workflow: str, kind: str, seq: int | None, detail: Mapping[str, Any] | str, at: str) -> None:
        text = detail if isinstance(detail, str) else canonical_text(detail)
        head = chains[workflow]
        n = head.n + 1
        data = (
            f'{{"at":{_string(at)},"detail":{text},"kind":{_string(kind)},"n":{n},"prev":{head.quoted_hash},'
            f'"seq":{"null" if seq is None else seq},"workflow":{head.quoted_workflow}}}'
        ).encode("utf-8", "surrogatepass")
        digest = sha256(data).hexdigest() if key is None else new_hmac(key, data, sha256).hexdigest()
        sealed = f"{prefix}{n}:{digest}"
        rows.append((workflow, seq, kind, text, at, head.hash, sealed))
        head.n, head.hash, head.quoted_hash = n, sealed, f'"{sealed}"'  # a hash holds nothing to escape

    for event in events:
        newest = chains[event.workflow].hash
        if key is not None and newest and not keyed(newest):
            link(event.workflow, KEYED, None, {"unkeyed_head": newest}, event.at)
        link(event.workflow, event.kind, event.seq, event.detail, event.at)
    return rows


def start_chains(execute: Execute, key: bytes | None, from_version: int, now: str) -> int:
    """The migration to schema 4: each workflow's chain starts with a marker vouching for its rows as they are.

    Runs inside the migration's transaction. Returns how many chains were started.
    """
    rows = execute(
        "SELECT workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at, idempotency_key"
        " FROM calls ORDER BY workflow_id, seq",
        (),
    ).fetchall()
    per: dict[str, dict[str, Any]] = {}
    for row in rows:
        digest = row_digest(row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])
        per.setdefault(row[0], {})[str(int(row[1]))] = digest
    workflows = [row[0] for row in execute("SELECT workflow_id FROM workflows ORDER BY workflow_id", ()).fetchall()]
    events = [
        Event(
            w,
            CHAIN_START,
            None,
            {"reason": "migrated", "from_version": from_version, "rows": per.get(w, {})},
            now,
        )
        for w in sorted(set(workflows) | set(per))
    ]
    for link in append(events, key, heads_by_query(execute)):
        execute(INSERT_LINK, link)
    return len(events)


# ---- what a call row must look like ----------------------------------------------------------------------


def row_digest(
    tool: str,
    arguments: str,
    signature: str,
    state: str,
    outcome: str | None,
    started_at: str,
    finished_at: str | None,
    key: str | None,
    identity: str | None = None,
) -> dict[str, Any]:
    """The columns of a call row the chain vouches for, with its texts as digests (``identity`` only where the
    call has one, so that rows and chains written before schema 5 read as they did)."""
    digest: dict[str, Any] = {
        "tool": tool,
        "arguments": text_digest(arguments),
        "signature": signature,
        "state": state,
        "outcome": text_digest(outcome),
        "started_at": started_at,
        "finished_at": finished_at,
        "key": key,
    }
    if identity is not None:
        digest["identity"] = identity
    return digest


def _nullable(text: str | None) -> str:
    return "null" if text is None else _string(text)


def reserved_detail(tool: str, arguments: str, signature: str, key: str | None, identity: str | None = None) -> str:
    """The canonical text of a ``reserved`` event's detail (``{"arguments", "identity", "key", "signature",
    "tool"}``, ``identity`` only where the call has one), written directly: it is on every journaled call's path."""
    named = f'"identity":{_string(identity)},' if identity is not None else ""
    return (
        f'{{"arguments":{_nullable(text_digest(arguments))},{named}"key":{_nullable(key)},'
        f'"signature":{_string(signature)},"tool":{_string(tool)}}}'
    )


def finished_detail(outcome: str | None) -> str:
    """The canonical text of a ``completed`` or ``failed`` event's detail (``{"outcome"}``)."""
    return f'{{"outcome":{_nullable(text_digest(outcome))}}}'


def row_after(rows: dict[int, dict[str, Any]], link: Link, detail: Mapping[str, Any]) -> None:
    """Apply one link to the call rows it implies (seq -> ``row_digest``), in place.

    Kinds that say nothing about a call row (replays of note, forks, policy records) leave them alone; a policy
    that changes a row does it through the unit of work, whose own events say so.
    """
    seq = link.seq
    if link.kind == "reserved" and seq is not None:
        rows[seq] = {
            "tool": detail.get("tool"),
            "arguments": detail.get("arguments"),
            "signature": detail.get("signature"),
            "state": "PENDING",
            "outcome": None,
            "started_at": link.at,
            "finished_at": None,
            "key": detail.get("key"),
        }
        if "identity" in detail:
            rows[seq]["identity"] = detail["identity"]
    elif link.kind in ("completed", "failed") and seq is not None and seq in rows:
        rows[seq] = {**rows[seq], "state": link.kind.upper(), "outcome": detail.get("outcome"), "finished_at": link.at}
    elif link.kind == "resolved" and seq is not None and seq in rows:
        action = detail.get("action")
        if action == "released":
            del rows[seq]
        else:
            state = "COMPLETED" if action == "completed" else "FAILED"
            rows[seq] = {**rows[seq], "state": state, "outcome": detail.get("outcome"), "finished_at": link.at}
    elif link.kind == CHAIN_START:
        rows.update({int(s): dict(r) for s, r in detail.get("rows", {}).items()})
    elif link.kind == GC:
        for removed in detail.get("removed", []):
            rows.pop(int(removed), None)
