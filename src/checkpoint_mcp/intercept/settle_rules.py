"""Settling an in-doubt call by the upstream's own means, as a tool policy declares: never by guessing.

A call that was in flight when a proxy died is *in doubt*: it may or may not have run. Three declarations in the
policy file let Checkpoint settle it without an operator:

* **idempotent**: the server promises (``idempotentHint``) that running the call again has no further effect, so
  an in-doubt call met again is simply sent again, as it is. The promise is the server's, not Checkpoint's.
* **idempotency**: the upstream deduplicates a call on a key. Checkpoint sends every call of such a tool with a
  key derived from its journal row (``idempotency_key``), so an in-doubt call can be sent again with the very same
  key: the upstream runs it at most once and answers with its outcome.
* **probe**: a read-only tool of the same upstream says whether the call landed. Its arguments are taken from the
  in-doubt call's arguments by JSON pointers (RFC 6901); ``happened_if`` / ``not_happened_if`` test its result's
  ``structuredContent``. Only a matcher that says so settles the call: an error, a timeout, a result neither
  matcher accepts, or both at once, leaves it in doubt.

This module is pure: it plans a settlement (``plan``), builds keys, requests and verdicts; the settler
(``settler.py``) carries them out, the interceptor sends them and ``journal/`` records what they decided. What a
later replay of a probed call returns is ``probed_outcome``: a result that says the call ran, with the evidence,
because the call's own result was never received.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import json
import secrets
from collections.abc import Mapping
from typing import Any, NamedTuple

from checkpoint_mcp.clock import seconds_since
from checkpoint_mcp.intercept.policy import Matcher, Probe, ToolRule
from checkpoint_mcp.intercept.policy.pointer import MISSING, PointerError, parse_pointer, resolve
from checkpoint_mcp.wire import dumps, set_member

SETTLED_META = "checkpoint/settled"
"""The result ``_meta`` key of a call settled by a probe: how it was settled, and the evidence."""

KEY_PREFIX = "checkpoint-"


def can_settle(rule: ToolRule | None) -> bool:
    """True when ``rule`` declares a way to settle an in-doubt call of its tool."""
    return rule is not None and (rule.probe is not None or rule.idempotency is not None or rule.idempotent)


# ---- idempotency keys ---------------------------------------------------------------------------------------


def idempotency_key(workflow: str, seq: int, agent_key: str | None) -> str:
    """The key sent upstream with a call: derived from the agent's own key when it gave one, else from the
    workflow and sequence, so a call sent again (after a crash, by any replica) carries the same key, and calls of
    different workflows never share one (``checkpoint-`` and 40 hex digits)."""
    basis = f"key\n{workflow}\n{agent_key}" if agent_key is not None else f"seq\n{workflow}\n{seq}"
    return KEY_PREFIX + hashlib.sha256(basis.encode()).hexdigest()[:40]


def with_key_argument(line: bytes, argument: str, key: str) -> bytes:
    """The tools/call ``line`` with ``params.arguments[argument]`` set to ``key``, every other byte unchanged.

    An argument the agent already gave is left as it is: it is the agent's own key, and the call's signature
    covers it, so a call sent again carries it again.

    Raises:
        ValueError: the line is not a JSON object.
    """
    text = line.decode()
    params = json.loads(text).get("params") or {}
    arguments = params.get("arguments")
    if isinstance(arguments, dict) and argument in arguments:
        return line
    newline = "\n" if text.endswith("\n") else ""
    edited = set_member(text.rstrip("\r\n"), ("params", "arguments", argument), dumps(key))
    return (edited + newline).encode()


# ---- probes -------------------------------------------------------------------------------------------------


def probe_arguments(probe: Probe, call_arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The probe's arguments, each taken from the in-doubt call's arguments by its JSON pointer (RFC 6901).

    Raises:
        PointerError: a pointer finds nothing in the call's arguments (the probe cannot be asked).
    """
    built: dict[str, Any] = {}
    for name, pointer in probe.arguments.items():
        value = resolve(dict(call_arguments), parse_pointer(pointer))
        if value is MISSING:
            raise PointerError(f"{pointer!r} finds nothing in the call's arguments (for the probe's {name!r})")
        built[name] = value
    return built


_probe_ids = itertools.count(1)
_PROBE_ID_PREFIX = "checkpoint-probe-"
_process_tag = secrets.token_hex(4)


def probe_request_id() -> str:
    """A JSON-RPC id for a probe, distinct from any a client is likely to use."""
    return f"{_PROBE_ID_PREFIX}{_process_tag}-{next(_probe_ids)}"


def probe_request(ident: str, probe: Probe, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None) -> bytes:
    """The tools/call line that asks the probe; ``meta``: the in-doubt call's ``_meta`` (a 2026-07-28 upstream
    needs its protocol version and client info on every request), without Checkpoint's own keys."""
    params: dict[str, Any] = {"name": probe.tool, "arguments": dict(arguments)}
    kept = {k: v for k, v in (meta or {}).items() if not k.startswith("checkpoint")}
    if kept:
        params["_meta"] = kept
    return (dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}) + "\n").encode()


class Verdict(enum.Enum):
    """What a probe proved about an in-doubt call."""

    HAPPENED = "happened"  # ``happened_if`` matched (and ``not_happened_if`` did not): the call ran
    NOT_HAPPENED = "not_happened"  # ``not_happened_if`` matched (and ``happened_if`` did not): it did not run
    UNKNOWN = "unknown"  # an error, a timeout, neither matcher, or both: it stays in doubt


class Finding(NamedTuple):
    """A probe's verdict, why, and the evidence (what was asked and what came back)."""

    verdict: Verdict
    reason: str
    probe: str
    arguments: Mapping[str, Any]
    result: Any  # the probe's result, its JSON-RPC error object, or None (no answer)
    redacted: bool = False  # --redact-args-in-journal: the probe's arguments (taken from the call's) are not kept

    def evidence(self) -> dict[str, Any]:
        """The audit record's detail."""
        return {
            "by": "probe",
            "verdict": self.verdict.value,
            "reason": self.reason,
            "probe": self.probe,
            "arguments": "«redacted»" if self.redacted else dict(self.arguments),
            "result": self.result,
        }


def judge(
    probe: Probe, arguments: Mapping[str, Any], response: Mapping[str, Any], started_at: str | None = None
) -> Finding:
    """The verdict of a probe's JSON-RPC ``response`` (the whole message) about a call started at ``started_at``
    (ISO 8601 UTC, as journaled). A call younger than the probe's ``settle_after`` may still land (a remote
    server can go on running a call whose proxy died), so "did not happen" is not believed for it yet."""
    result = response.get("result")
    verdict, reason = Verdict.UNKNOWN, ""
    if "error" in response:
        result, reason = response.get("error"), "the probe answered with an error"
    elif not isinstance(result, dict):
        reason = "the probe's answer has no result object"
    elif result.get("isError") is True:
        reason = "the probe's tool reported an error"
    elif "structuredContent" not in result:
        reason = "the probe's result has no structuredContent"
    else:
        content = result["structuredContent"]
        happened = _matches(probe.happened_if, content)
        not_happened = _matches(probe.not_happened_if, content)
        if happened and not not_happened:
            verdict, reason = Verdict.HAPPENED, "happened_if matched"
        elif not_happened and not happened:
            verdict, reason = Verdict.NOT_HAPPENED, "not_happened_if matched"
            age = seconds_since(started_at)
            if age is not None and age < probe.settle_after:
                verdict = Verdict.UNKNOWN
                reason = (
                    f"not_happened_if matched, but the call started only {age:.0f}s ago (settle_after "
                    f"{probe.settle_after:g}s): it may still land"
                )
        elif happened:
            reason = "both happened_if and not_happened_if matched"
        else:
            reason = "neither happened_if nor not_happened_if matched"
    return Finding(verdict, reason, probe.tool, arguments, result)


def unanswered(probe: Probe, arguments: Mapping[str, Any], reason: str) -> Finding:
    """The finding of a probe that got no answer (a timeout, a broken exchange, an upstream gone)."""
    return Finding(Verdict.UNKNOWN, reason, probe.tool, arguments, None)


def _matches(matcher: Matcher | None, content: Any) -> bool:
    if matcher is None:
        return False
    try:
        return bool(matcher.test(content))
    except (LookupError, TypeError, ValueError):
        return False  # a pointer that finds nothing, or a value of another type, is no match


def probed_outcome(finding: Finding, workflow: str, seq: int) -> str:
    """The result journaled for a call a probe proved to have run: its own result was never received, so a replay
    returns this one, which says so (a text for the model) and carries the evidence in ``_meta``. It has no
    ``structuredContent``: it could not honour the tool's output schema."""
    text = (
        f"This call (#{seq} of workflow {workflow}) was in flight when a proxy stopped. The read-only tool "
        f"{finding.probe!r} showed that it had run, so Checkpoint recorded it as completed and did not run it again. "
        "Its own result was never received."
    )
    result = {
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "_meta": {SETTLED_META: finding.evidence()},
    }
    return dumps(result)


def idempotent_evidence(tool: str) -> dict[str, Any]:
    """The audit detail of an in-doubt call of an idempotent tool, sent again as it is."""
    return {"by": "idempotent", "tool": tool, "via": "sent again as is: the policy declares the tool idempotent"}


def resent_evidence(key: str, how: str) -> dict[str, Any]:
    """The audit detail of an in-doubt call sent again under its idempotency key (``how``: argument or header)."""
    return {"by": "idempotency", "key": key, "via": how}


# ---- the plan ------------------------------------------------------------------------------------------------


class Resend(NamedTuple):
    """Send the in-doubt call again as ``line``, once the settlement is recorded (by ``by``, with ``evidence``)."""

    line: bytes
    by: str
    evidence: dict[str, Any]
    how: str  # for the log: "as is (idempotent)", "under its idempotency key"


class AskProbe(NamedTuple):
    """Ask the probe (``request``, under the id ``ident``) whether the in-doubt call landed."""

    probe: Probe
    arguments: dict[str, Any]
    request: bytes
    ident: str


class Unprovable(NamedTuple):
    """Nothing the policy declares can settle the call now (``finding``: what a probe could not do, if any)."""

    finding: Finding | None


def plan(
    rule: ToolRule,
    workflow: str,
    seq: int,
    agent_key: str | None,
    params: Mapping[str, Any],
    line: bytes,
    *,
    probe_read_only: bool,
) -> Resend | AskProbe | Unprovable:
    """How the in-doubt call at ``seq`` of ``workflow``, met again as ``line`` (its ``params``), is settled under its
    tool's ``rule``: sent again as is (idempotent), probed (a probe known to be read-only), or sent again under its
    idempotency key; else it cannot be.

    Raises:
        ValueError: the line is not a JSON object (an idempotency key cannot be put in it).
    """
    if rule.idempotent:
        return Resend(line, "idempotent", idempotent_evidence(params["name"]), "as is (idempotent)")
    probe = rule.probe
    if probe is not None and probe_read_only:
        try:
            built = probe_arguments(probe, params.get("arguments") or {})
        except PointerError as exc:
            return Unprovable(unanswered(probe, {}, f"the probe's arguments cannot be built: {exc}"))
        ident = probe_request_id()
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else None
        return AskProbe(probe, built, probe_request(ident, probe, built, meta), ident)
    idempotency = rule.idempotency
    if idempotency is not None:
        key = idempotency_key(workflow, seq, agent_key)
        argument, header = idempotency.argument, idempotency.header
        evidence = resent_evidence(key, f"argument {argument}" if argument is not None else f"header {header}")
        keyed = with_key_argument(line, argument, key) if argument is not None else line
        return Resend(keyed, "idempotency key", evidence, "under its idempotency key")
    if probe is not None:
        why = (
            f"its tool is not known to be read-only: declare [tools.{probe.tool}] read_only = true, or let a "
            "tools/list that marks it readOnlyHint pass through this proxy first"
        )
        return Unprovable(unanswered(probe, {}, why))
    return Unprovable(None)


__all__ = [
    "SETTLED_META",
    "AskProbe",
    "Finding",
    "PointerError",
    "Resend",
    "Unprovable",
    "Verdict",
    "can_settle",
    "idempotency_key",
    "idempotent_evidence",
    "judge",
    "plan",
    "probe_arguments",
    "probe_request",
    "probe_request_id",
    "probed_outcome",
    "unanswered",
    "with_key_argument",
]
