"""The journaled life of one tools/call: its sequence, the journal's decision, its outcome.

``CallJournal`` gives each call a sequence (``_meta.checkpoint_seq``, a key given as ``_meta.checkpoint_key`` or as
``params.idempotencyKey`` (SEP-3182), or the in-memory cursor), asks the journal what is recorded there, and says
what to do: run it upstream (its PENDING row in the open batch), answer it from the journal (replay), or refuse it
(divergence, in doubt, collected). With ``--on-divergence fork`` a divergent call starts a branch instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NamedTuple

from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.errors import (
    CallRefused,
    Collected,
    Divergence,
    InDoubt,
    InvalidCallParams,
    JoinInFlight,
    JournalError,
    JournalWriteFailed,
    StillInFlight,
)
from checkpoint_mcp.intercept import repeats
from checkpoint_mcp.intercept.approvals import ApprovalGate, client_of
from checkpoint_mcp.intercept.hints import KEY_HINT, SEQ_HINT, call_hints
from checkpoint_mcp.intercept.policy import ToolRule
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.intercept.settle import SettleRule, can_settle
from checkpoint_mcp.journal.base import (
    MAX_HINT_SEQ,
    MAX_SEQ,
    REDACTED_ARGUMENTS,
    CallRecord,
    CallState,
    Diverge,
    InDoubtAt,
    Journal,
    Lineage,
    Proceed,
    UnitOfWork,
    decide,
)
from checkpoint_mcp.journal.report import iso_before, operator_commands
from checkpoint_mcp.moved_codes import current_error
from checkpoint_mcp.signature import call_signature
from checkpoint_mcp.wire import dumps, raw_response_line, result_span, set_member

logger = logging.getLogger(__name__)

META_KEY = "checkpoint/journal"
"""The result ``_meta`` key under which every journaled result says ``{"workflow", "seq", "replayed"}`` (and
``"approval"``, the request's id, for a call that ran on an approval)."""


class Claimed(NamedTuple):
    """A call that goes upstream; its PENDING row is in the open batch (or was, for a continued round)."""

    workflow: str
    seq: int
    tool: str
    signature: str
    continued: bool = False  # a 2026-07-28 retry with inputResponses: its row was reserved by the first round
    key: str | None = None  # the agent's own key (``_meta.checkpoint_key`` or ``idempotencyKey``), if any
    durable: bool = False  # its PENDING row was committed at claim (``Journal.reserve_unless_repeat``)
    approval: int | None = None  # the approval it runs on (a tool under ``approve``): its result's _meta says so


class Unsettled(NamedTuple):
    """An in-doubt call met again (by sequence, key or content) whose tool's policy can settle it: by a probe, or
    by sending it again under its idempotency key. The interceptor settles it, or answers ``refusal``."""

    record: CallRecord  # the PENDING row, as found
    rule: SettleRule
    refusal: InDoubt  # the answer when it cannot be settled


class _AwaitingInput(NamedTuple):
    """A 2026-07-28 call that answered ``input_required``: its retry continues the same journal entry."""

    claimed: Claimed
    request_state: str | None


class CallJournal:
    """Sequences and journal decisions for the tools/calls of one proxy."""

    def __init__(
        self, config: ProxyConfig, journal: Journal, lineage: Lineage, join_timeout: float | None = None
    ) -> None:
        """``join_timeout``: a call matching one in flight here (same sequence or key, same signature) joins it
        for up to that many seconds (`checkpoint serve`); None: it is refused as in flight (the stdio proxy)."""
        self.principal: str | None = None  # whose calls these are (serve --issuer sets it per workflow); None: one
        self._config = config
        self._join_timeout = join_timeout
        self._journal = journal
        self._lineage = lineage
        self._committed_lineage = lineage
        # Rows above the clients' range (written by an older Checkpoint, which accepted any 64-bit sequence)
        # do not move the cursor: it keeps 2**63 - 2**53 sequences of room.
        highest = journal.max_seq(lineage, upto=MAX_HINT_SEQ)
        self._cursor = 1 if config.replay_from_start else highest + 1
        # Sequences from here on hold no row: a call the cursor places there needs no read. (Hinted calls push
        # the cursor past their sequence, so the cursor never revisits one this process used.)
        self._fresh_from = highest + 1
        self._awaiting: list[_AwaitingInput] = []
        self._running: dict[tuple[str, int], str] = {}  # (workflow, seq) -> signature, until committed
        self._quoted: dict[str, str] = {}
        self._gate = ApprovalGate(journal)
        self._client: Mapping[str, Any] | None = None  # the clientInfo of the call being claimed

    @property
    def lineage(self) -> Lineage:
        """Where new calls are journaled."""
        return self._lineage

    @property
    def cursor(self) -> int:
        """The sequence the next call without a hint will take."""
        return self._cursor

    # ---- claiming -----------------------------------------------------------------------------------------

    def claim(
        self,
        ident: Any,
        params: dict[str, Any],
        unit: UnitOfWork,
        read_only: bool = False,
        client: Mapping[str, Any] | None = None,
    ) -> Claimed | Unsettled | bytes:
        """Decide one valid tools/call: the claim to forward, an in-doubt call its policy may settle, or the line
        that answers it from the journal.

        ``read_only``: the upstream marks the tool ``readOnlyHint: true``; such a call is never a repeat.
        ``client``: the client's ``clientInfo`` from its ``initialize`` (who asks, where the call needs an approval;
        a 2026-07-28 call's own ``_meta`` names it instead).

        Raises:
            CallRefused: invalid hints, in doubt, divergent or collected; or it waits for an approval.
            JournalError: the journal could not be read or written.
        """
        self._client = client_of(params, client)
        name: str = params["name"]
        arguments: dict[str, Any] = params.get("arguments") or {}
        hint, key = call_hints(params)
        try:
            signature = call_signature(name, arguments)
        except ValueError as exc:
            raise InvalidCallParams(f"invalid params: arguments of {name!r} cannot be canonicalised: {exc}") from exc
        if "inputResponses" in params or "requestState" in params:
            continued = self._continuation(signature, hint, params.get("requestState"))
            if continued is not None:
                return continued
        guarded: ToolRule | None = None
        identity = repeats.identity_of(self._config.policy, name, arguments)
        if hint is None and key is None and not read_only and self._config.policy is not None:
            answer, guarded = self._repeat(ident, unit, name, arguments, signature, identity)
            if answer is not None:
                return answer
        seq, record = self._place(unit, hint, key)
        branch = self._lineage.branch_at(seq)
        self._refuse_if_running(record, branch.workflow, seq, name, signature)
        if record is None and seq <= branch.collected_through:
            raise Collected(
                workflow=branch.workflow, seq=seq, commands=operator_commands(self._where, branch.workflow, seq)
            )
        decision = decide(record, signature)
        if isinstance(decision, Proceed):
            guard = (ident, guarded) if guarded is not None else None
            return self._reserve(unit, seq, name, arguments, signature, key, guard, identity)
        if isinstance(decision, InDoubtAt):
            return self.in_doubt(decision.record, seq, signature)
        if isinstance(decision, Diverge):
            if self._config.on_divergence == "fork":
                self._lineage = unit.fork(self._lineage, seq)
                self._cursor = seq + 1  # the branch's history ends with this call
                self._fresh_from = seq + 1
                logger.warning(
                    "call #%d diverged from workflow %r: continuing on the new branch %r",
                    seq,
                    decision.record.workflow,
                    self._lineage.head,
                )
                return self._reserve(unit, seq, name, arguments, signature, key, identity=identity)
            raise self._divergence(decision.record, name, arguments, signature)
        return self._replay_line(ident, decision.record)

    def in_doubt(self, found: CallRecord, seq: int, signature: str) -> Unsettled:
        """A PENDING row met by a call with ``signature`` (by its sequence, its key, or, for a repeat caught by
        content, its signature): an ``Unsettled`` to settle when the call is the same and truly in doubt (no live
        process runs it) and its tool's policy declares a probe or an idempotency key.

        Raises:
            InDoubt: it cannot be settled (in flight, another call, or no such policy): the refusal.
            JoinInFlight: the same call is running here or on a live replica, and joins are enabled.
        """
        refusal = self._pending(found, seq, signature)
        policy = self._config.policy
        rule = policy.rule_for(found.tool) if policy is not None else None
        truly = refusal.data.get("reason") == "in_doubt"
        if rule is None or not truly or found.signature != signature or not can_settle(rule):
            raise refusal
        return Unsettled(found, rule, refusal)

    def settling(self, record: CallRecord) -> Claimed:
        """The in-doubt call ``record`` is being settled by this process: in flight here until ``finished``."""
        self._running[(record.workflow, record.seq)] = record.signature
        return Claimed(record.workflow, record.seq, record.tool, record.signature, continued=True, key=record.key)

    def replay_of(self, ident: Any, record: CallRecord) -> bytes:
        """The line that answers ``ident`` from the finished ``record`` (a replay)."""
        return self._replay_line(ident, record)

    def _repeat(
        self, ident: Any, unit: UnitOfWork, name: str, arguments: dict[str, Any], signature: str, identity: str | None
    ) -> tuple[bytes | Unsettled | None, ToolRule | None]:
        """A call with no sequence and no key, under a policy: the answer if it repeats a journaled call by its
        content (see ``repeats``), None if it is to run (no such call, or the original FAILED); and the rule under
        which it must be reserved by ``_reserve_unless_repeat`` (None: reserved as any call).

        Where replicas share the journal, a call to run is looked up again and reserved in one transaction
        serialized per signature, so that two replicas given the same new call at once cannot both run it.

        Raises:
            RepeatRefused: it repeats a completed call and the rule says refuse.
            InDoubt: it repeats a call in doubt, or in flight here (the stdio proxy).
            JoinInFlight: it repeats a call in flight here or on a live replica, and joins are enabled.
            JournalError: the journal could not be read.
        """
        assert self._config.policy is not None
        rule = self._config.policy.rule_for(name)
        if not rule.catches_repeats:
            return None, None
        shared = self._journal.replica_id is not None and self._lineage == self._committed_lineage
        guarded = rule if shared else None
        workflows = {branch.workflow for branch in self._lineage.branches}
        for (workflow, seq), running in self._running.items():
            if running == signature and workflow in workflows:
                # Reserved by another session of this process and not yet committed: no row shows it yet.
                self._refuse_if_running(None, workflow, seq, name, signature)
        since = iso_before(timedelta(seconds=rule.window_seconds))
        found = unit.read_signature(self._lineage, signature, since, identity)
        if found is None:
            return None, guarded
        call = repeats.RepeatCall(name, arguments, signature, identity)
        answer = self._answer_repeat(ident, unit, call, rule, found, durable=guarded is None)
        return answer, guarded

    def _answer_repeat(
        self, ident: Any, unit: UnitOfWork, call: repeats.RepeatCall, rule: ToolRule, found: CallRecord, durable: bool
    ) -> bytes | Unsettled | None:
        """What a repeat of ``found`` gets (see ``_repeat``); its audit record is queued in ``unit``, except a
        confirmation's where ``durable`` is false: the guarded reservation links it (``_reserve_unless_repeat``)."""
        signature = call.signature
        action = repeats.verdict(found, rule)
        if action is repeats.Action.IN_DOUBT:
            refusal = self._pending(found, found.seq, signature)  # raises JoinInFlight to join a live original
            if refusal.data.get("reason") == "in_flight":
                action = repeats.Action.IN_FLIGHT
            repeats.record(unit, found, rule, action, call)
            if action is repeats.Action.IN_DOUBT:
                return self.in_doubt(found, found.seq, signature)  # settled by the policy, or refused
            raise refusal
        if action is repeats.Action.CONFIRM_ASKED and repeats.confirms(
            unit.newest_repeat(found.workflow, found.seq), rule
        ):
            action = repeats.Action.CONFIRMED
        gated = rule.approve is not None and action is repeats.Action.RAN_AGAIN  # its approval's events say if it ran
        if (action is not repeats.Action.CONFIRMED or durable) and not gated:
            repeats.record(unit, found, rule, action, call)
        state = found.state.value
        logger.info(
            "call %s repeats call #%d of %r (%s): %s", call.tool, found.seq, found.workflow, state, action.value
        )
        if action in (repeats.Action.RAN_AGAIN, repeats.Action.CONFIRMED):
            return None
        if action in (repeats.Action.REFUSED, repeats.Action.CONFIRM_ASKED):
            raise repeats.refusal(found, rule, self._where, call, self._config.redact_args)
        return repeats.replay_line(ident, found)

    def _pending(self, found: CallRecord, seq: int, signature: str) -> InDoubt:
        """A PENDING row: in flight here or on a live replica (a re-sent call joins it, where joins are enabled),
        else in doubt.

        Raises:
            JoinInFlight: the same call is running here or on a live replica, and joins are enabled.
        """
        self._join_if_running(found.workflow, seq, found.tool, signature)
        replica = found.replica
        elsewhere = replica is not None and replica != self._journal.replica_id and self._journal.replica_alive(replica)
        if elsewhere and self._join_timeout is not None and found.signature == signature:
            commands = operator_commands(self._where, found.workflow, seq)
            waited = self._join_timeout
            refusal = StillInFlight(workflow=found.workflow, seq=seq, tool=found.tool, waited=waited, commands=commands)
            raise JoinInFlight(found.workflow, seq, refusal)
        return InDoubt(
            workflow=found.workflow,
            seq=seq,
            tool=found.tool,
            journaled_at=found.started_at,
            commands=operator_commands(self._where, found.workflow, seq),
            in_flight_here=(found.workflow, seq) in self._running,
            replica=replica if elsewhere else None,
        )

    def _join_if_running(self, workflow: str, seq: int, tool: str, signature: str) -> None:
        """A re-sent call (same signature) of a call running here joins it, where joins are enabled.

        Raises:
            JoinInFlight: it does.
        """
        if self._join_timeout is not None and self._running.get((workflow, seq)) == signature:
            commands = operator_commands(self._where, workflow, seq)
            refusal = StillInFlight(workflow=workflow, seq=seq, tool=tool, waited=self._join_timeout, commands=commands)
            raise JoinInFlight(workflow, seq, refusal)

    def _refuse_if_running(self, record: CallRecord | None, workflow: str, seq: int, name: str, signature: str) -> None:
        """A sequence reserved by another unit of work of this process (another gateway session) and not yet
        committed is in flight here, though no row shows it yet.

        Raises:
            JoinInFlight: the same call, and joins are enabled.
            InDoubt: it is.
        """
        if record is None and (workflow, seq) in self._running:
            self._join_if_running(workflow, seq, name, signature)
            raise InDoubt(
                workflow=workflow,
                seq=seq,
                tool=name,
                journaled_at="",
                commands=operator_commands(self._where, workflow, seq),
                in_flight_here=True,
            )

    def _place(self, unit: UnitOfWork, hint: int | None, key: str | None) -> tuple[int, CallRecord | None]:
        """The sequence a call takes (its key's, its hint, or the cursor's next) and the row found there.

        Raises:
            InvalidCallParams: the key is journaled at another sequence than the hint, or no sequence is left.
            JournalError: the journal could not be read.
        """
        record = unit.read_key(self._lineage, key) if key is not None else None
        if record is not None:
            if hint is not None and hint != record.seq:
                raise InvalidCallParams(
                    f"invalid params: {KEY_HINT} {key!r} is journaled at sequence {record.seq}, not {hint}",
                    {"reason": "key_sequence_mismatch", "key": key, "seq": record.seq, "received": hint},
                )
            return record.seq, record
        # A gateway on PostgreSQL takes unnamed sequences from the database's counter, shared by its replicas.
        shared = self._journal.allocate_seq(self._lineage.head) if hint is None else None
        seq = hint if hint is not None else shared if shared is not None else self._cursor
        if seq > MAX_SEQ:
            raise InvalidCallParams(
                f"invalid params: workflow {self._lineage.head!r} has used every sequence up to {MAX_SEQ}; "
                f"name one with _meta.{SEQ_HINT}",
                {"reason": "sequences_exhausted"},
            )
        self._cursor = max(self._cursor, seq + 1)
        if hint is not None or seq < self._fresh_from or seq > MAX_HINT_SEQ:
            record = unit.read(self._lineage, seq)
        return seq, record

    def _reserve(
        self,
        unit: UnitOfWork,
        seq: int,
        name: str,
        arguments: dict[str, Any],
        signature: str,
        key: str | None,
        guard: tuple[Any, ToolRule] | None = None,
        identity: str | None = None,
    ) -> Claimed | Unsettled | bytes:
        """Reserve the call in ``unit``; ``guard`` (the request's id and its repeat rule): reserve it durably now,
        unless it turns out to repeat a call journaled meanwhile (``_reserve_unless_repeat``). A tool under
        ``approve`` is reserved only on its approval (``_reserve_approved``).

        Raises:
            ApprovalRequired: its tool needs an approval and this call has no usable one.
        """
        policy = self._config.policy
        rule = policy.rule_for(name) if policy is not None else None
        if rule is not None and rule.approve is not None:
            call = repeats.RepeatCall(name, arguments, signature, identity)
            return self._reserve_approved(unit, seq, call, key, rule, guard[0] if guard is not None else None)
        if guard is not None:
            call = repeats.RepeatCall(name, arguments, signature, identity)
            return self._reserve_unless_repeat(guard[0], unit, seq, call, guard[1])
        stored = REDACTED_ARGUMENTS if self._config.redact_args else dumps(arguments)
        workflow = self._lineage.head
        unit.reserve(workflow, seq, name, stored, signature, key, identity)
        self._running[(workflow, seq)] = signature
        return Claimed(workflow, seq, name, signature, key=key)

    def _reserve_unless_repeat(
        self,
        ident: Any,
        unit: UnitOfWork,
        seq: int,
        call: repeats.RepeatCall,
        rule: ToolRule,
    ) -> Claimed | Unsettled | bytes:
        """Reserve a new call under a repeat rule durably now, unless a call with its identity was journaled
        meanwhile (by another replica, within milliseconds): then the call is a repeat of that one. A call that
        confirms a refused repeat (``repeat = "confirm"``) is reserved over the original in the same transaction
        that records the confirmation, so that of two replicas given it at once only one runs it.

        Raises:
            CallRefused: as ``_repeat``.
            JournalError: the journal could not be read or written (nothing was reserved).
        """
        stored = REDACTED_ARGUMENTS if self._config.redact_args else dumps(call.arguments)
        since = iso_before(timedelta(seconds=rule.window_seconds))
        confirmed = repeats.confirmation(unit, self._lineage, call, rule, since)
        found, reserved = self._journal.reserve_unless_repeat(
            self._lineage, since, seq, call.tool, stored, call.signature, None, call.identity, confirmed
        )
        if not reserved:
            assert found is not None
            answer = self._answer_repeat(ident, unit, call, rule, found, durable=False)
            if answer is None:  # a confirmation another replica took first: this one is a repeat again
                raise repeats.refusal(found, rule, self._where, call, self._config.redact_args)
            return answer
        workflow = self._lineage.head
        self._running[(workflow, seq)] = call.signature
        return Claimed(workflow, seq, call.tool, call.signature, durable=True)

    def _reserve_approved(
        self, unit: UnitOfWork, seq: int, call: repeats.RepeatCall, key: str | None, rule: ToolRule, guard: Any
    ) -> Claimed | Unsettled | bytes:
        """Reserve a call of a tool under ``approve`` on its usable approval, using it in the same transaction; else
        refuse it, naming its request (see ``approvals``). ``guard``: the request's id where the call is also
        looked up as a repeat in that transaction (replicas sharing the journal), else None.

        Raises:
            ApprovalRequired: no usable approval (a new request is made, durable, or one is waiting or denied).
            CallRefused: it repeats a call journaled meanwhile, as ``_repeat``.
            JournalError: the journal could not be read or written (nothing was reserved).
        """
        stored = REDACTED_ARGUMENTS if self._config.redact_args else dumps(call.arguments)
        workflow = self._lineage.head
        since = iso_before(timedelta(seconds=rule.window_seconds)) if guard is not None else None
        for _ in range(3):  # a grant another process used first, or that expired meanwhile, is looked up again
            found = self._gate.usable(workflow, call.identity or call.signature)
            if found is None:
                break
            consumed = self._gate.reserve(self._lineage, seq, found, stored, key, since)
            if consumed.reserved:
                logger.info("call %s runs on approval #%d of %r", call.tool, found.id, workflow)
                self._running[(workflow, seq)] = call.signature
                return Claimed(workflow, seq, call.tool, call.signature, key=key, durable=True, approval=found.id)
            if consumed.repeat is not None:
                answer = self._answer_repeat(guard, unit, call, rule, consumed.repeat, durable=False)
                if answer is not None:
                    return answer
                since = None  # its rule lets it run again: only the approval decides now
        if self._cursor == seq + 1:
            self._cursor = seq  # a refused call takes no sequence: the next call gets the one this one would have had
        raise self._gate.refusal(workflow, call.tool, stored, call.signature, call.identity, rule, self._client)

    def _withdraw(self, claimed: Claimed) -> None:
        """A call reserved durably at claim whose unit of work then failed was never sent: its row becomes FAILED
        (the upstream never saw it), where the journal can still be written; else it stays PENDING, in doubt."""
        if not claimed.durable:
            return
        unit = self._journal.unit()
        refusal = JournalWriteFailed(workflow=claimed.workflow, seq=claimed.seq, tool=claimed.tool, cause="not sent")
        unit.finish(claimed.workflow, claimed.seq, CallState.FAILED, dumps(refusal.to_error()))
        with contextlib.suppress(JournalError):
            unit.commit()

    def savepoint(self) -> tuple[Any, ...]:
        """What ``restore`` needs to undo the claims made from here on (before their unit commits)."""
        return (self._lineage, self._cursor, self._fresh_from, self._awaiting[:] if self._awaiting else None)

    def restore(self, savepoint: tuple[Any, ...], claimed: Claimed | None) -> None:
        """Undo what happened since ``savepoint``: a line whose routing failed must not touch its neighbours."""
        self._lineage, self._cursor, self._fresh_from, awaiting = savepoint
        self._awaiting = awaiting or []
        if claimed is not None and not claimed.continued:
            self._running.pop((claimed.workflow, claimed.seq), None)
            self._withdraw(claimed)

    def committed(self, lineage: Lineage | None = None) -> None:
        """The unit of work committed: its branch (if it forked) is now where calls go. ``lineage``: where calls
        went when its batch was taken (a later batch, still uncommitted, may have forked since)."""
        self._committed_lineage = lineage if lineage is not None else self._lineage

    def rolled_back(self, claims: list[Claimed]) -> None:
        """The unit of work failed: forget its reservations and any branch it started."""
        self._lineage = self._committed_lineage
        for claimed in claims:
            self._running.pop((claimed.workflow, claimed.seq), None)
            self._withdraw(claimed)

    def _continuation(self, signature: str, hint: int | None, request_state: Any) -> Claimed | None:
        candidates = [
            a for a in self._awaiting if a.claimed.signature == signature and (hint is None or a.claimed.seq == hint)
        ]
        if not candidates:
            return None
        exact = [a for a in candidates if a.request_state is not None and a.request_state == request_state]
        chosen = (exact or candidates)[0]
        self._awaiting.remove(chosen)
        claimed = chosen.claimed
        return claimed._replace(continued=True)

    @property
    def _where(self) -> str:
        return self._journal.location

    def _divergence(self, record: CallRecord, name: str, arguments: dict[str, Any], signature: str) -> Divergence:
        journaled: dict[str, Any] = {"tool": record.tool, "signature": record.signature, "at": record.started_at}
        received: dict[str, Any] = {"tool": name, "signature": signature}
        difference: list[str] = []
        if record.tool != name:
            difference.append(f"tool: {dumps(record.tool)} → {dumps(name)}")
        if record.redacted or self._config.redact_args:
            difference.append("arguments differ (not shown: --redact-args-in-journal)")
        else:
            old_arguments = json.loads(record.arguments)
            journaled["arguments"] = old_arguments
            received["arguments"] = arguments
            difference.extend(json_difference(old_arguments, arguments))
        commands = operator_commands(self._where, record.workflow, record.seq)
        return Divergence(
            workflow=record.workflow,
            seq=record.seq,
            journaled=journaled,
            received=received,
            difference=difference or ["arguments differ"],
            commands={"show": commands["show"], "release": commands["release"]},
        )

    # ---- answers ------------------------------------------------------------------------------------------

    def _replay_line(self, ident: Any, record: CallRecord) -> bytes:
        outcome = record.outcome or "null"
        if record.state is CallState.FAILED:
            return raw_response_line(ident, "error", current_error(outcome))
        return raw_response_line(ident, "result", self._meta_in_result(outcome, record.workflow, record.seq, True))

    def _meta_in_result(self, result_text: str, workflow: str, seq: int, replayed: bool) -> str:
        info = dumps({"workflow": workflow, "seq": seq, "replayed": replayed})
        try:
            return set_member(result_text, ("_meta", META_KEY), info)
        except ValueError:
            return result_text  # not an object: nothing to annotate

    def _info(self, workflow: str, seq: int, replayed: bool, approval: int | None = None) -> str:
        quoted = self._quoted.get(workflow)
        if quoted is None:
            quoted = self._quoted[workflow] = dumps(workflow)
        approved = "" if approval is None else f',"approval":{approval}'
        return f'{{"workflow":{quoted},"seq":{seq},"replayed":{"true" if replayed else "false"}{approved}}}'

    def completed(self, text: str, result: Any, claimed: Claimed, span: tuple[int, int] | None) -> tuple[str, bytes]:
        """(The result's exact text for the journal, the line with its _meta); ``span``: the result's, if known."""
        try:
            span = span or result_span(text)
        except ValueError:
            return "null", text.encode()
        if span is None:
            return "null", self.annotate(text, claimed)
        start, end = span
        outcome = text[start:end]
        if isinstance(result, dict) and "_meta" not in result and text[start] == "{":
            info = self._info(claimed.workflow, claimed.seq, False, claimed.approval)
            separator = "," if result else ""
            annotated = f'{text[: start + 1]}"_meta":{{"{META_KEY}":{info}}}{separator}{text[start + 1 :]}'
            return outcome, annotated.encode()
        return outcome, self.annotate(text, claimed)

    def annotate(self, line_text: str, claimed: Claimed) -> bytes:
        """The upstream's response line with the journal's ``_meta`` added to its result."""
        info = self._info(claimed.workflow, claimed.seq, False, claimed.approval)
        try:
            return set_member(line_text, ("result", "_meta", META_KEY), info).encode()
        except ValueError:
            return line_text.encode()

    def awaiting_input(self, claimed: Claimed, request_state: Any) -> None:
        """The call answered ``input_required``: its row stays PENDING until the client's retry completes it."""
        self._awaiting.append(_AwaitingInput(claimed, request_state if isinstance(request_state, str) else None))

    def finished(self, claimed: Claimed) -> None:
        """The call is no longer running in this proxy (its outcome, if any, is committed)."""
        self._running.pop((claimed.workflow, claimed.seq), None)


__all__ = ["META_KEY", "CallJournal", "CallRefused", "Claimed", "operator_commands"]
