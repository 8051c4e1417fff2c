"""What `checkpoint policy check` prints: the effective rule of every tool of a ``tools/list``. Pure; no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from checkpoint_mcp.clock import duration_text
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy.annotations import hint_may_skip_journal
from checkpoint_mcp.intercept.policy.rules import Policy, Repeat, ToolRule, WithinSession


def tools_from_json(text: str) -> list[dict[str, Any]]:
    """The tools of a ``tools/list`` answer given as JSON: the whole response, its ``result``, or the array.

    Raises:
        UsageError: the text is not JSON, or holds no tools array.
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"the tools/list result on stdin is not JSON: {exc}") from exc
    if isinstance(value, dict) and isinstance(value.get("result"), dict):
        value = value["result"]
    if isinstance(value, dict):
        value = value.get("tools")
    if not isinstance(value, list):
        raise UsageError('stdin must hold a tools/list result: {"tools": [...]}, the whole response, or the array')
    return [tool for tool in value if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


def read_only_hint(tool: Mapping[str, Any]) -> bool:
    """Whether the upstream marks ``tool`` ``readOnlyHint: true``."""
    annotations = tool.get("annotations")
    return isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True


def effective_rules(
    policy: Policy, tools: Iterable[Mapping[str, Any]], trust_annotations: bool
) -> list[dict[str, Any]]:
    """One entry per tool: what the proxy does with its calls under ``policy``."""
    rows: list[dict[str, Any]] = []
    for tool in tools:
        name = str(tool["name"])
        rule = policy.rule_for(name)
        hinted = read_only_hint(tool)
        rows.append(_row(name, rule, hinted, trust_annotations))
    return rows


def _row(name: str, rule: ToolRule, hinted: bool, trust_annotations: bool) -> dict[str, Any]:
    journaled = rule.journal and not (trust_annotations and hinted and hint_may_skip_journal(rule))
    journal_why, repeat = _journal_and_repeat(rule, journaled, hinted)
    row: dict[str, Any] = {
        "tool": name,
        "rule": rule.source,
        "journal": journaled,
        "journalReason": journal_why,
        "readOnly": rule.read_only or hinted,
        "idempotent": rule.idempotent and journaled,
        "repeat": repeat,
        # None: the call is never looked up as a repeat (an idempotent one is, only to find an in-doubt original).
        "windowSeconds": rule.window_seconds
        if journaled and rule.catches_repeats and not hinted and not rule.idempotent
        else None,
        "probe": None,
        "idempotency": None,
        # What makes a repeat: all the arguments, or a part of them (match / ignore).
        "identity": None,
        "confirmWithinSeconds": None,
        # Who approves each call before it runs (operator | elicit), and how long a grant stays usable (once).
        "approve": rule.approve.value if journaled and rule.approve is not None else None,
        "approvalExpiresSeconds": rule.approval_seconds if journaled and rule.approve is not None else None,
        # What a repeat of a call that happened gets: within one unbroken session, and across a loss of memory (a
        # new session, a clear, a compaction): "runs", or the repeat rule ("refused", "replayed", "confirm").
        "withinSession": None,
        "acrossSessions": None,
        # At most so many calls per window; the amounts at a pointer per window (None: none).
        "limit": None,
        "budget": None,
    }
    catches = journaled and rule.catches_repeats and not hinted
    if journaled:
        row.update(_repeats_and_limits(rule, hinted))
    if catches and rule.identity is not None:
        row["identity"] = rule.identity.describe()
    if catches and rule.repeat is Repeat.CONFIRM:
        row["confirmWithinSeconds"] = rule.confirm_seconds
    if rule.probe is not None and journaled:
        probe = rule.probe
        row["probe"] = {
            "tool": probe.tool,
            "arguments": dict(probe.arguments),
            "happenedIf": probe.happened_if.describe() if probe.happened_if else None,
            "notHappenedIf": probe.not_happened_if.describe() if probe.not_happened_if else None,
            "timeoutSeconds": probe.timeout,
        }
    if rule.idempotency is not None and journaled:
        kind = "argument" if rule.idempotency.argument is not None else "header"
        row["idempotency"] = {kind: rule.idempotency.argument or rule.idempotency.header}
    # Sub-rules chosen by an argument, in order: the first that matches gives the call its rule (None: none).
    row["when"] = None
    if rule.when and journaled:
        row["when"] = [
            {
                "name": sub.name,
                "test": sub.match.describe(),
                "pointers": list(sub.match.pointers),
                "prefixes": list(sub.match.prefixes.written) if sub.match.prefixes is not None else None,
                "regex": sub.match.regex.pattern if sub.match.regex is not None else None,
                **_row(name, sub.rule, hinted, trust_annotations),
            }
            for sub in rule.when
        ]
    return row


def render_rules(rows: list[dict[str, Any]]) -> str:
    """The rules as an aligned table, one tool a line, then each probe and key on its own line."""
    if not rows:
        return "(the upstream lists no tools)"
    width = max(len(row["tool"]) for row in rows)
    lines: list[str] = []
    for row in rows:
        journal = "journaled" if row["journal"] else f"not journaled ({row['journalReason']})"
        lines.append(f"{row['tool']:<{width}}  {journal}; {_repeat_text(row)}   [{row['rule']}]")
        lines += _details(row, width)
        for sub in row["when"] or ():
            lines.append(f"{'':<{width}}  when {sub['test']}: {_repeat_text(sub)}   [{sub['rule']}]")
            lines += [f"  {line}" for line in _details(sub, width)]
        if row["when"]:
            lines.append(f"{'':<{width}}  any other call: the tool's own rule above")
    return "\n".join(lines)


def _repeat_text(row: dict[str, Any]) -> str:
    """What the rule makes of a repeat, in words: ``repeat refuse within 24h``."""
    repeat = str(row["repeat"])
    if row["windowSeconds"] is not None:
        repeat += f" within {duration_text(row['windowSeconds'])}"
    if row["confirmWithinSeconds"] is not None:
        repeat += f" (runs if sent again within {duration_text(row['confirmWithinSeconds'])})"
    if row["identity"] is not None:
        repeat += f", same call by {row['identity']}"
    return repeat


def _details(row: dict[str, Any], width: int) -> list[str]:
    """A rule's lines after its first: approval, probe, key, repeats by session, limit and budget."""
    lines: list[str] = []
    if row["approve"] is not None:
        asker = {"operator": "a person (checkpoint journal approve)", "elicit": "the client's user, else a person"}
        lines.append(
            f"{'':<{width}}  approve = {row['approve']}: each call waits for {asker[row['approve']]}; "
            f"a grant is usable once within {duration_text(row['approvalExpiresSeconds'])}"
        )
    if row["probe"] is not None:
        probe = row["probe"]
        tests = "; ".join(
            f"{label} {probe[key]}"
            for label, key in (("happened if", "happenedIf"), ("not if", "notHappenedIf"))
            if probe[key]
        )
        lines.append(f"{'':<{width}}  probe {probe['tool']}({_arguments(probe['arguments'])}): {tests}")
    if row["idempotency"] is not None:
        ((kind, target),) = row["idempotency"].items()
        lines.append(f"{'':<{width}}  idempotency key in {kind} {target!r}")
    if row["acrossSessions"] is not None and row["acrossSessions"] != "runs":
        lines.append(
            f"{'':<{width}}  a repeat within one session {row['withinSession']}; in a new session, or after a "
            f"clear or a compaction, it {row['acrossSessions']}"
        )
    if row["limit"] is not None:
        limit = row["limit"]
        lines.append(
            f"{'':<{width}}  limit: at most {limit['calls']} call(s) per {duration_text(limit['perSeconds'])}, "
            f"counted {_SCOPES[limit['scope']]}"
        )
    if row["budget"] is not None:
        budget = row["budget"]
        lines.append(
            f"{'':<{width}}  budget: the numbers at {budget['sum']} add up to at most {budget['max']:g} per "
            f"{duration_text(budget['perSeconds'])}, counted {_SCOPES[budget['scope']]}"
        )
    return lines


def _journal_and_repeat(rule: ToolRule, journaled: bool, hinted: bool) -> tuple[str, str]:
    """Why a tool is journaled or not, and what its rule makes of a repeat, in words."""
    if not rule.journal:
        journal_why = "journal = false"
    elif not journaled:
        journal_why = "readOnlyHint and --trust-annotations"
    else:
        journal_why = "journaled"
    if not journaled:
        return journal_why, "never a repeat (not journaled)"
    if rule.read_only:
        return journal_why, "never a repeat (read_only = true)"
    if hinted:
        return journal_why, "never a repeat (readOnlyHint)"
    if rule.idempotent:
        return journal_why, "repeat allow (idempotent: an in-doubt call is sent again as is)"
    return journal_why, f"repeat {rule.repeat.value}"


def _repeats_and_limits(rule: ToolRule, hinted: bool) -> dict[str, Any]:
    """What a journaled tool's repeats get within a session and across sessions (none: it reads), and its limit and
    budget (which count a tool that reads too)."""
    row: dict[str, Any] = {}
    if not rule.read_only and not hinted:
        caught = rule.repeat is not Repeat.ALLOW and not rule.idempotent
        across = _CAUGHT[rule.repeat] if caught else "runs"
        row["acrossSessions"] = across
        within = across
        if not caught:
            within = "runs"
        elif rule.within_session is WithinSession.RUN:
            # Where the client marks its sessions; where it never has (Claude Desktop, a hook switched off) the
            # proxy cannot tell one session from the next and asks (docs/sessions.md).
            within = "runs (where the client does not mark its sessions: asks once, runs when sent again)"
        row["withinSession"] = within
    if rule.limit is not None:
        limit = rule.limit
        row["limit"] = {"calls": limit.calls, "perSeconds": limit.per_seconds, "scope": limit.scope.value}
    if rule.budget is not None:
        budget = rule.budget
        row["budget"] = {
            "sum": budget.pointer,
            "max": budget.most,
            "perSeconds": budget.per_seconds,
            "scope": budget.scope.value,
        }
    return row


_CAUGHT = {Repeat.REFUSE: "is refused", Repeat.REPLAY: "is replayed", Repeat.CONFIRM: "asks for a confirmation"}
_SCOPES = {"workflow": "per workflow", "journal": "over every workflow of the journal", "principal": "per principal"}


def _arguments(arguments: Mapping[str, str]) -> str:
    return ", ".join(f"{name}={pointer}" for name, pointer in arguments.items())
