"""What the proxy does with each line: forward it as is, or journal, replay or refuse a tools/call.

The interceptor is synchronous and does no I/O of its own except through the journal: the relay hands it the
complete lines read in one go from one side and writes what it returns. Journal writes go into one unit of work
that the relay flushes as each turn of its loop ends, so the calls and answers of a burst, from both sides, share
one durable commit (group commit). Nothing that depends on a write is released before that commit: a PENDING
row is durable before the upstream sees the call, a COMPLETED row before the client sees the reply; the lines
behind such a line wait with it so that order is kept, except a request not journaled and its answer, which pass
(``_release_up``, ``_emit_down``). The decision for a tools/call is the ordered checks of ``decision/``; this
module carries out what they say (forward the reserved call, replay, refuse, join, settle, ask for an approval).
"""

from __future__ import annotations

import logging
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.errors import JournalError, JournalLost
from checkpoint_mcp.intercept.answers import annotated, completed, repeat_line, replay_line
from checkpoint_mcp.intercept.approval_gate import ApprovalGate
from checkpoint_mcp.intercept.asking import (
    ASK_TIMEOUT,
    CAPABILITIES_META,
    Asker,
    asks_in_form,
    input_required,
    withdrawn,
)
from checkpoint_mcp.intercept.decision import Call, Facts, decide
from checkpoint_mcp.intercept.decision.memory import SessionMemory
from checkpoint_mcp.intercept.decision.verdicts import (
    AskApproval,
    Claimed,
    Continue,
    Join,
    Note,
    Refuse,
    Reply,
    Settle,
    Verdict,
)
from checkpoint_mcp.intercept.inflight import TRACK_BY_METHOD, InFlight, InFlightTable, Track
from checkpoint_mcp.intercept.messages import (
    batch_has_tool_call,
    head_key,
    internal_error_replies,
    request_key,
    utf8_lines,
    valid_tools_call,
)
from checkpoint_mcp.intercept.policy import BUILT_IN, Approve, ToolRule
from checkpoint_mcp.intercept.policy.annotations import hint_may_skip_journal
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.intercept.results import PlainResults
from checkpoint_mcp.intercept.settle_rules import idempotency_key, unanswered, with_key_argument
from checkpoint_mcp.intercept.settler import Answered, Forward, PendingProbe, Settler
from checkpoint_mcp.intercept.turns import ClientBatch, Flushed, Flushing, Resubmit
from checkpoint_mcp.intercept.workflow import Workflow
from checkpoint_mcp.journal.base import Journal, Lineage
from checkpoint_mcp.journal.conditions import Unmet
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ApprovalRequired,
    CallRefused,
    DuplicateRequestId,
    JournalWriteFailed,
    Stopped,
    UpstreamExited,
)
from checkpoint_mcp.wire import (
    Kind,
    Message,
    WireParseError,
    classify,
    error_line,
    id_key,
    member_text,
    usual_result,
)

logger = logging.getLogger(__name__)


def _horizon(config: ProxyConfig) -> float:
    """The longest window in which the policy finds a repeat (a sub-rule's included): a session need not remember an
    answer longer."""
    policy = config.policy
    if policy is None:
        return 0.0
    windows = (one.window_seconds for rule in policy.rules() for one in rule.variants)
    return max(windows, default=BUILT_IN.window_seconds)


_PASSES = 0  # a client request that is not journaled: never waits for a commit (``_release_up``)
_QUEUES = 1  # a request that keeps its place (a journaled call, a probe): behind a held line it waits too
_KEEPS = 2  # a notification or a response: it keeps its place, and no request passes it while it is held


class Interceptor:
    """The routing and journaling logic of one proxy process."""

    def __init__(
        self,
        config: ProxyConfig,
        journal: Journal | None,
        lineage: Lineage | None,
        workflow: Workflow | None = None,
        *,
        session: bool = True,
        client: str | None = None,
    ) -> None:
        """``workflow``: what this process knows of the workflow's calls, when several interceptors (a gateway's
        sessions) share one workflow in one process; by default this interceptor has its own. ``session``: its
        lines are one client session's (a stdio proxy, a gateway MCP session), so it remembers which calls the
        client was answered (``decision/memory.py``); False for requests of no session (a gateway's 2026-07-28
        requests, which many clients share). ``client``: the client process of that session (a stdio proxy's,
        ``client_process``), whose session starts are its own; None where none is known (a gateway's)."""
        self._config = config
        self._journal = journal
        self._session = SessionMemory(client, _horizon(config)) if session else None
        if workflow is None and journal is not None and lineage is not None:
            workflow = Workflow(journal, lineage, replay_from_start=config.replay_from_start)
        self._calls = workflow
        self._in_flight = InFlightTable()
        self._results = PlainResults(config.server_name, config.server_version, config.policy)
        self.fatal: str | None = None
        """Set when the journal is gone for good (``JournalLost``), or the upstream's tools/list shows that the tool
        policy cannot be used: the relay must shut the proxy down."""
        self._unit = journal.unit() if journal is not None else None
        # Lines waiting for the unit's commit, per direction, in order; a client line carries the entry whose
        # PENDING row it waits for (None: it only waits behind one).
        self._held_up: list[tuple[bytes, InFlight | None]] = []
        self._held_down: list[bytes] = []
        self._finishing: list[Claimed] = []  # calls whose outcome is in the unit
        self._settler = Settler(journal, workflow, config.redact_args) if journal and workflow else None
        self._gate = ApprovalGate(journal) if journal is not None else None
        self._asker = Asker(journal) if journal and workflow else None  # elicitations we sent (``approve = "elicit"``)
        self._timers: list[tuple[str, float]] = []  # probes sent this turn: (probe id, timeout), for the pump
        self._flushing: Flushing | None = None  # a batch being committed elsewhere (a committer thread)
        self._up_barrier = self._down_barrier = False  # a line is held that nothing may pass (``_release_up``)
        self.hello: dict[str, Any] = {}  # the client's initialize params: its clientInfo and capabilities

    @property
    def needs_flush(self) -> bool:
        """True when journal writes or the lines behind them wait for ``flush``."""
        return bool(self._held_up or self._held_down or (self._unit is not None and not self._unit.empty))

    def _note(self, exc: JournalError) -> None:
        if isinstance(exc, JournalLost) and self.fatal is None:
            self.fatal = str(exc)

    def outstanding(self) -> int:
        """Requests from the client still waiting for an answer (cancelled ones excluded)."""
        return self._in_flight.outstanding()

    def journaled_outstanding(self) -> int:
        """Journaled calls still waiting for their answer (cancelled ones excluded): what a shutdown waits for."""
        return self._in_flight.journaled_outstanding()

    # ---- client -> upstream -------------------------------------------------------------------------------

    def from_client(self, lines: list[bytes]) -> ClientBatch:
        """Route a batch of complete lines from the client.

        Lines that need no journal write (and are not behind one) come back at once; a journaled call and the
        client lines after it wait for ``flush`` (``_release_up``). Each line is judged on its own: one that cannot
        be routed is answered alone, and whatever it had started (a journal write, a sequence) is undone.
        """
        out = ClientBatch()
        upward: list[tuple[bytes, InFlight | None, int]] = []
        unit, calls = self._unit, self._calls
        for line in lines:
            mark = unit.mark() if unit is not None else 0
            savepoint = calls.savepoint() if calls is not None else None
            tracked, forwarded, answered = len(self._in_flight), len(upward), len(out.to_client)
            try:
                self._client_line(line, out, upward)
            except Exception:
                # A bug of ours: this line alone gets an internal error; its neighbours are untouched.
                logger.exception("internal error while routing a line from the client; it was not forwarded")
                claimed = next((entry.claimed for _, entry, _ in upward[forwarded:] if entry is not None), None)
                if unit is not None:
                    unit.rollback_to(mark)
                if calls is not None and savepoint is not None:
                    calls.restore(savepoint, claimed)
                while len(self._in_flight) > tracked:
                    self._in_flight.popitem()
                del upward[forwarded:]
                del out.to_client[answered:]
                out.to_client.extend(internal_error_replies([line]))
        self._release_up(upward, out.to_upstream)
        return out

    def _release_up(self, upward: list[tuple[bytes, InFlight | None, int]], to_upstream: list[bytes]) -> None:
        """Send each routed line now, or hold it: a journaled call waits for its PENDING row, and the lines after
        it wait with it, except a request that is not journaled (a ping, a tools/list, a read), which needs nothing
        from the commit and whose order against other requests in flight JSON-RPC leaves open. It never passes a
        held notification or response (a cancellation, ``initialized``): those keep their place."""
        flushing = self._flushing
        held = bool(self._held_up) or (flushing is not None and bool(flushing.held_up))
        barrier = self._up_barrier or (flushing is not None and flushing.up_barrier)
        for line, entry, kind in upward:
            if kind == _PASSES and not barrier:
                to_upstream.append(line)
            elif held or entry is not None:
                held = True
                self._held_up.append((line, entry))
                if kind == _KEEPS:
                    barrier = self._up_barrier = True
            else:
                to_upstream.append(line)

    def _client_line(self, line: bytes, out: ClientBatch, upward: list[tuple[bytes, InFlight | None, int]]) -> None:
        try:
            message = classify(line)
        except WireParseError as exc:
            if line.strip():
                out.to_client.append(error_line(None, {"code": PARSE_ERROR, "message": f"parse error: {exc}"}))
            else:
                upward.append((line, None, _KEEPS))
            return
        if message.kind is Kind.REQUEST and id_key(message.id) is None:
            # Its answer could not be matched to it (JSON-RPC ids are strings, numbers or null).
            error = {"code": INVALID_REQUEST, "message": "invalid request: an id must be a string, a number or null"}
            out.to_client.append(error_line(None, {**error, "data": {"reason": "invalid_id"}}))
            return
        if message.kind is Kind.RESPONSE and self._asker is not None and self._asker.owns(message.id):
            self._user_answered(message, out, upward)
            return
        if message.kind is not Kind.REQUEST or message.method != "tools/call" or self._calls is None:
            if self._route_other(message, line, out):
                upward.append((line, None, _PASSES if message.kind is Kind.REQUEST else _KEEPS))
            return
        self._call_line(message, line, out, upward)

    def _call_line(
        self,
        message: Message,
        line: bytes,
        out: ClientBatch,
        upward: list[tuple[bytes, InFlight | None, int]],
        ask: bool = True,
    ) -> None:
        """Route one tools/call line; ``ask``: its user may be asked to approve it (see ``_ask_user``)."""
        if ask and self._asker is not None and (retried := self._asker.retried(message)) is not None:
            (message, line), ask = retried, False  # a 2026-07-28 retry with its user's answer (``asking``)
        try:
            routed = self._tool_call(message, out, line, ask)
        except JournalError as exc:
            self._note(exc)
            logger.error("journal read failed; refusing a call: %s", exc)
            out.to_client.append(error_line(message.id, self._write_failure(message, str(exc))))
            return
        if routed is not None:
            entry, line = routed
            reserved = entry.claimed is not None and not entry.claimed.continued
            plain = entry.claimed is None and entry.track is Track.PLAIN  # a tools/call that is not journaled
            upward.append((line, entry if reserved else None, _PASSES if plain else _QUEUES))

    def _write_failure(self, message: Message, cause: str) -> dict[str, Any]:
        params = message.params if isinstance(message.params, dict) else {}
        workflow = self._calls.lineage.head if self._calls is not None else ""
        return JournalWriteFailed(workflow=workflow, seq=None, tool=str(params.get("name", "")), cause=cause).to_error()

    def flush(self) -> Flushed:
        """Commit the pending journal writes (one durable transaction for both directions), then release the
        lines that waited for them. A call whose PENDING row could not be written is answered with an error
        instead of being forwarded; an answer whose COMPLETE could not be written is forwarded anyway (its row
        stays PENDING: in doubt, never re-run)."""
        flushing = self.begin_flush()
        error: BaseException | None = None
        if flushing.batch is not None:
            assert self._journal is not None
            try:
                self._journal.write_batches([flushing.batch])
            except Exception as exc:
                error = exc
        return self.end_flush(flushing, error)

    def begin_flush(self) -> Flushing:
        """``flush`` in two steps, for a pump that commits on another thread: take the pending writes and the
        lines waiting for them; write ``batch`` (``Journal.write_batches``) anywhere; then ``end_flush``. Until
        then the lines that arrive behind the held ones wait too, and only one flush may be begun at a time."""
        assert self._flushing is None, "a flush is already under way"
        held_up, self._held_up = self._held_up, []
        held_down, self._held_down = self._held_down, []
        finishing, self._finishing = self._finishing, []
        batch = self._unit.take(relaxed=self._config.relaxed_completions) if self._unit is not None else None
        lineage = self._calls.lineage if self._calls is not None else None
        flushing = Flushing(held_up, held_down, finishing, batch, lineage)
        flushing.up_barrier, flushing.down_barrier = self._up_barrier, self._down_barrier
        self._up_barrier = self._down_barrier = False
        if batch is not None:
            self._flushing = flushing
        return flushing

    def flush_here(self, flushing: Flushing) -> Flushed | None:
        """Commit ``flushing``'s batch on this thread if the journal says that is cheaper and need not wait
        (``Journal.write_now``), and end the flush; None when the batch must go to a committer instead."""
        assert flushing.batch is not None
        assert self._journal is not None
        try:
            if not self._journal.write_now([flushing.batch]):
                return None
        except Exception as exc:
            return self.end_flush(flushing, exc)
        return self.end_flush(flushing, None)

    def end_flush(self, flushing: Flushing, error: BaseException | None) -> Flushed:
        """The batch of ``flushing`` was written (``error`` None) or not: release, or refuse, what waited for it."""
        if flushing.batch is not None:
            self._flushing = None
            assert self._unit is not None
            self._unit.settled(flushing.batch)
        held_up, held_down = flushing.held_up, flushing.held_down
        reserved, finishing = flushing.reserved, flushing.finishing
        if isinstance(error, JournalError):
            self._note(error)
            return self._failed_flush(held_up, held_down, reserved, finishing, str(error))
        if error is not None:  # a bug of ours: the held lines must still be answered or delivered
            logger.error("internal error while committing the journal", exc_info=error)
            return self._failed_flush(held_up, held_down, reserved, finishing, f"internal error: {error}")
        if self._calls is not None:
            self._calls.committed(flushing.lineage)
            for claimed in finishing:
                self._calls.finished(claimed)  # only now: until its outcome is durable, a re-sent call joins it
        if reserved:
            debug.trigger("after_pending_commit")
        if finishing:
            debug.trigger("after_complete_commit")
        return Flushed([line for line, _ in held_up], held_down, bool(reserved))

    def _failed_flush(
        self,
        held_up: list[tuple[bytes, InFlight | None]],
        held_down: list[bytes],
        reserved: list[InFlight],
        finishing: list[Claimed],
        cause: str,
    ) -> Flushed:
        if finishing:
            # The upstream has run these calls; hiding their answers would invite a retry, a second run.
            if self._calls is not None:
                for done in finishing:
                    self._calls.finished(done)
            seqs = ", ".join(f"#{claimed.seq}" for claimed in finishing)
            logger.error("could not journal the outcome of call(s) %s (they stay in doubt): %s", seqs, cause)
        refusals: list[bytes] = []
        if reserved:
            logger.error("journal write failed; refusing %d call(s): %s", len(reserved), cause)
            assert self._calls is not None
            self._calls.rolled_back([entry.claimed for entry in reserved if entry.claimed is not None])
            for entry in reserved:
                self._in_flight.pop(request_key(entry.ident), None)
                claimed = entry.claimed
                assert claimed is not None
                refusal = JournalWriteFailed(workflow=claimed.workflow, seq=claimed.seq, tool=claimed.tool, cause=cause)
                refusals.append(error_line(entry.ident, refusal.to_error()))
        to_upstream = [line for line, entry in held_up if entry is None]
        return Flushed(to_upstream, refusals + held_down, False)

    def _route_other(self, message: Message, line: bytes, out: ClientBatch) -> bool:
        """Track or answer a line that is not a journaled tools/call; True if it goes upstream."""
        kind = message.kind
        if kind is Kind.REQUEST:
            if message.method == "initialize" and isinstance(message.params, dict):  # who asks, for approvals
                self.hello = message.params
            track = TRACK_BY_METHOD.get(message.method or "", Track.PLAIN)
            self._in_flight.track(track, message.id)
        elif kind is Kind.NOTIFICATION:
            if message.method == "notifications/cancelled":
                self._in_flight.mark_cancelled(message.params)
                if self._session is not None and isinstance(message.params, dict):
                    self._session.cancelled(id_key(message.params.get("requestId")))
            elif message.method == "tools/call":
                # A tools/call without an id cannot be answered, so it could run unseen: never forward it.
                logger.warning("dropped a tools/call without an id: it cannot be answered or journaled")
                return False
        elif kind is Kind.BATCH and self._journal is not None and (message.deep or batch_has_tool_call(message.body)):
            # A batch too deep to read whole might hold a tools/call: it would run unjournaled.
            error = {
                "code": INVALID_REQUEST,
                "message": "JSON-RPC batches containing tools/call cannot be journaled; send one message per line",
            }
            out.to_client.append(error_line(None, error))
            return False
        elif (kind is Kind.BATCH and not message.body and not message.deep) or (
            kind is Kind.OTHER and not isinstance(message.body, dict)
        ):
            # An empty batch is an invalid request (JSON-RPC 2.0), answered once like any other.
            out.to_client.append(
                error_line(None, {"code": INVALID_REQUEST, "message": "invalid request: not a JSON-RPC message"})
            )
            return False
        return True

    def _tool_call(
        self, message: Message, out: ClientBatch, line: bytes, ask: bool = False
    ) -> tuple[InFlight, bytes] | None:
        """Route one tools/call request: decide it (``decision/``) and carry out the verdict. Returns the entry and
        the line to forward (with the idempotency key its policy asks for), or None if it was answered here.

        Raises:
            JournalError: the journal could not be read.
        """
        try:
            params = valid_tools_call(message)
            key = request_key(message.id)
            if key in self._in_flight:
                raise DuplicateRequestId(message.id)
            workflow, unit = self._calls, self._unit
            assert workflow is not None
            assert unit is not None
            name = params["name"]
            read_only = self._results.read_only.get(name, False)
            policy = self._config.policy
            rule = policy.rule_for(name) if policy is not None else BUILT_IN
            if not rule.journal or (self._config.trust_annotations and read_only and hint_may_skip_journal(rule)):
                return self._in_flight.track(Track.PLAIN, message.id, key=key), line
            else:
                call = Call.of(message.id, params, rule, read_only, self.hello.get("clientInfo"))
                place = workflow.place(call, unit)
                facts = Facts(
                    call,
                    workflow,
                    place,
                    unit,
                    policy,
                    on_divergence=self._config.on_divergence,
                    redact=self._config.redact_args,
                    session=self._session,
                    tool_prefix=self._config.tool_prefix,
                )
                decision = decide(call, facts)
                if decision.fork is not None:
                    workflow.forked(unit, decision.fork)
                verdict: Verdict | Claimed
                if decision.verdict is None:
                    conditions = [condition for _, condition in decision.required]
                    notes = list(decision.notes)
                    reserved = workflow.reserve(call, facts.place, self._config.redact_args, conditions, notes, unit)
                    verdict = decision.unmet(call, facts, reserved) if isinstance(reserved, Unmet) else reserved
                else:
                    verdict = decision.verdict
                if not isinstance(verdict, Claimed | Continue):
                    return self._carry_out(message, line, call, verdict, out, ask)
                claimed = verdict if isinstance(verdict, Claimed) else workflow.continued(verdict.awaiting)
                if isinstance(verdict, Claimed):
                    line = self._keyed(line, claimed)
                return self._in_flight.track(Track.TOOL_CALL, message.id, claimed, key=key), line
        except CallRefused as refusal:
            out.to_client.append(error_line(message.id, refusal.to_error()))
            return None

    def _carry_out(
        self,
        message: Message,
        line: bytes,
        call: Call,
        verdict: Reply | Refuse | Join | Settle | AskApproval,
        out: ClientBatch,
        ask: bool,
    ) -> tuple[InFlight, bytes] | None:
        """Carry out a verdict that does not send the call upstream as it came: answer it, join it, settle the call
        it met, or ask for its approval.

        Raises:
            JournalError: the journal could not be read or written.
        """
        if isinstance(verdict, Reply | Refuse | Settle):
            self._noted(verdict.notes)
        if isinstance(verdict, Settle):
            return self._settle(message, line, call, verdict, out)
        if isinstance(verdict, Reply):
            answer = (repeat_line if verdict.repeat else replay_line)(message.id, verdict.record)
            out.to_client.append(self._results.with_identity(answer))
            return None
        if isinstance(verdict, AskApproval):
            assert self._gate is not None
            assert self._calls is not None
            refused = self._gate.refusal(self._calls.head, call, self._config.redact_args, verdict.newest)
            verdict = Refuse(refused)
            if ask and self._ask_user(message, line, refused, call.rule, out):
                return None
        refusal = error_line(message.id, verdict.refusal.to_error())
        if isinstance(verdict, Join):
            out.resubmits.append(Resubmit(line, refusal, verdict.workflow, verdict.seq))
        else:
            out.to_client.append(refusal)
        return None

    def _noted(self, notes: tuple[Note, ...]) -> None:
        """Queue a verdict's notes (audit events) in the unit of work: durable with its next commit."""
        assert self._unit is not None
        for note in notes:
            self._unit.record_event(note.workflow, note.kind, note.seq, note.detail)

    def _keyed(self, line: bytes, claimed: Claimed) -> bytes:
        """The tools/call ``line`` with the idempotency key its tool's policy puts in an argument, if it does."""
        policy = self._config.policy
        idempotency = policy.rule_for(claimed.tool).idempotency if policy is not None else None
        if idempotency is None or idempotency.argument is None:
            return line
        return with_key_argument(
            line, idempotency.argument, idempotency_key(claimed.workflow, claimed.seq, claimed.key)
        )

    def upstream_headers(self, key: tuple[str, Any] | None) -> dict[str, str]:
        """The HTTP headers an ``--upstream-url`` upstream adds to the request with ``id_key`` ``key``: the
        idempotency key of a call whose tool's policy puts it in a header (``{ header = "NAME" }``), else none."""
        entry = self._in_flight.get(key) if key is not None else None
        policy = self._config.policy
        if entry is None or entry.track is not Track.TOOL_CALL or entry.claimed is None or policy is None:
            return {}
        claimed = entry.claimed
        idempotency = policy.rule_for(claimed.tool).idempotency
        if idempotency is None or idempotency.header is None:
            return {}
        return {idempotency.header: idempotency_key(claimed.workflow, claimed.seq, claimed.key)}

    # ---- in-doubt calls a policy settles (see settling.py) -----------------------------------------------

    def _settle(
        self, message: Message, line: bytes, call: Call, settle: Settle, out: ClientBatch
    ) -> tuple[InFlight, bytes] | None:
        assert self._settler is not None
        tool = settle.rule.probe.tool if settle.rule.probe is not None else None
        policy = self._config.policy
        read_only = tool is not None and policy is not None and policy.rule_for(tool).read_only
        read_only = read_only or (tool is not None and self._results.read_only.get(tool, False))
        step = self._settler.begin(message.id, line, call.params, settle, probe_read_only=read_only)
        if isinstance(step, Answered):
            out.to_client.append(step.line)
            return None
        if isinstance(step, Forward):
            return self._in_flight.track(Track.TOOL_CALL, message.id, step.claimed), step.line
        self._in_flight.track(Track.SETTLING, message.id, step.pending.claimed)
        self._timers.append((step.probe_id, step.timeout))
        return self._in_flight.track(Track.PROBE, step.probe_id, pending=step.pending), step.line

    def _probe_answer(self, entry: InFlight | None, message: Message, out: list[bytes]) -> bool:
        """True when the response is a probe's: settled here, or dropped (it came after its timeout); never
        forwarded."""
        if entry is None or entry.track is not Track.PROBE:
            return False
        if entry.pending is None:
            return True
        for answer in self._probe_concluded(entry.pending, message.body):
            self._emit_down(out, answer, waits=False)
        return True

    def take_timers(self) -> list[tuple[str, float]]:
        """The probes sent since the last call, with their timeouts: the pump calls ``probe_expired`` after each."""
        timers, self._timers = self._timers, []
        return timers

    def probe_expired(self, probe_id: str) -> list[bytes]:
        """A probe's timeout passed: if it is still unanswered, its call stays in doubt (what the client gets).
        Our elicitation's timeout (``_ask_user``): its call gets the operator path's refusal."""
        if self._asker is not None and self._asker.owns(probe_id):
            return self._user_silent(probe_id)
        key = request_key(probe_id)
        probe = self._in_flight.get(key)
        pending = probe.pending if probe is not None else None
        if probe is None or pending is None:
            return []
        # A tombstone: the probe's late answer, if one comes, is dropped (see ``_probe_answer``).
        probe.pending, probe.cancelled = None, True
        return self._probe_concluded(pending, None, f"no answer within {pending.probe.timeout:g}s")

    def _probe_concluded(self, pending: PendingProbe, response: dict[str, Any] | None, why: str = "") -> list[bytes]:
        """Settle the call waiting for a probe; the lines for the client now (a forwarded call waits for flush)."""
        assert self._settler is not None
        waiting = self._in_flight.pop(request_key(pending.ident), None)
        if waiting is None or waiting.cancelled:
            # Nobody waits for this call any more: it must not be sent now, and what the probe said stays unused.
            self._settler.conclude(pending, unanswered(pending.probe, pending.arguments, "the call was cancelled"))
            return []
        if response is None:
            step = self._settler.conclude(pending, unanswered(pending.probe, pending.arguments, why))
        else:
            step = self._settler.answered(pending, response)
        if isinstance(step, Forward):
            self._in_flight.track(Track.TOOL_CALL, pending.ident, step.claimed)
            self._held_up.append((step.line, None))
            return []
        return [self._results.with_identity(step.line)]

    # ---- upstream -> client -------------------------------------------------------------------------------

    def from_upstream(self, lines: list[bytes]) -> list[bytes]:
        """Route a batch of complete lines from the upstream; what can be written to the client at once.

        A journaled call's final answer, and the upstream lines after it, wait for ``flush`` (its COMPLETED or
        FAILED row must be durable before the client sees it). A line that is not UTF-8 is repaired first (each
        bad byte becomes U+FFFD): as it came, no client could read it.
        """
        lines = utf8_lines(lines)
        if not self._in_flight and not self._held_down and self._flushing is None:
            return lines
        out: list[bytes] = []
        for line in lines:
            if self._routed_by_head(line, out):
                continue
            entry = None
            message = None
            try:
                message = classify(line)
            except WireParseError:
                logger.warning("the upstream sent a line that is not JSON; forwarded as is")
            if message is not None and message.kind is Kind.RESPONSE:
                response_key = id_key(message.id)
                entry = self._in_flight.pop(response_key, None) if response_key is not None else None
                if self._probe_answer(entry, message, out):
                    continue
            if entry is None or message is None:
                # A notification or a server request keeps its place, and nothing passes it (progress before
                # the final answer, a list change before what follows it); a stray response only keeps its place.
                barrier = message is None or message.kind is not Kind.RESPONSE
                self._emit_down(out, line, waits=False, barrier=barrier)
            elif entry.claimed is not None:
                answer, final = self._tool_result(entry, entry.claimed, message.body, line.decode())
                self._emit_down(out, self._results.with_identity(answer), waits=final)
            else:
                plain_line = self._results.plain_result(entry, message, line)
                self._emit_down(out, self._results.with_identity(plain_line), waits=False, passes=True)
                if self._results.policy_refused is not None and self.fatal is None:
                    # Never run with a probe that might change something: stop, as for a lost journal.
                    self.fatal = f"the tool policy is refused: {self._results.policy_refused}"
        return out

    def _routed_by_head(self, line: bytes, out: list[bytes]) -> bool:
        """Route a response line by its head (``head_key``) without parsing it all; False: it needs the slow path."""
        key = head_key(line)
        if key is None:
            return False
        entry = self._in_flight.get(key)
        if entry is None:
            self._emit_down(out, line, waits=False)
            return True
        if entry.claimed is None and entry.track is Track.PLAIN:
            del self._in_flight[key]
            self._emit_down(out, self._results.with_identity(line), waits=False, passes=True)
            return True
        if entry.claimed is not None and entry.track is Track.TOOL_CALL:
            # A result written the usual way: its one parse serves the client's line and the journal.
            usual = usual_result(text := line.decode())
            if usual is not None:
                del self._in_flight[key]
                answer, final = self._tool_result(entry, entry.claimed, {"result": usual.result}, text, usual.span)
                self._emit_down(out, self._results.with_identity(answer), waits=final)
                return True
        return False

    def _emit_down(
        self, out: list[bytes], line: bytes, *, waits: bool, passes: bool = False, barrier: bool = False
    ) -> None:
        """Write ``line`` now, or hold it (it ``waits`` for a commit, or is behind a held line). An answer to a
        request not journaled ``passes`` held answers (JSON-RPC orders no responses), never a ``barrier``."""
        flushing = self._flushing
        if passes and not (self._down_barrier or (flushing is not None and flushing.down_barrier)):
            out.append(line)
        elif waits or self._held_down or (flushing is not None and flushing.held_down):
            self._held_down.append(line)
            if barrier:
                self._down_barrier = True
        else:
            out.append(line)

    def _tool_result(
        self, entry: InFlight, claimed: Claimed, body: Any, text: str, at: tuple[int, int] | None = None
    ) -> tuple[bytes, bool]:
        """The answer to send for a journaled call (``body``: its line ``text`` parsed; ``at``: where its result's
        text is, if known), and whether it must wait for its outcome to be committed. A completed call's answer,
        to a request the client did not cancel, is one its session remembers (``decision/memory.py``)."""
        assert self._calls is not None
        assert self._unit is not None
        debug.trigger("after_upstream_reply")
        if "error" in body:
            self._finish(claimed, CallState.FAILED, member_text(text, ("error",)) or "null")
            return text.encode(), True
        result = body.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            # Not a completion: the client will retry with inputResponses; the row stays PENDING until then.
            self._calls.awaiting_input(claimed, result.get("requestState"))
            return annotated(text, claimed), False
        outcome, answer = completed(text, result, claimed, at)
        tool_error = isinstance(result, dict) and result.get("isError") is True
        self._finish(claimed, CallState.COMPLETED, outcome, tool_error)
        if self._session is not None and not entry.cancelled:
            self._session.answered(request_key(entry.ident), claimed)
        return answer, True

    def _finish(self, claimed: Claimed, state: CallState, outcome: str, tool_error: bool = False) -> None:
        assert self._calls is not None
        assert self._unit is not None
        self._unit.finish(claimed.workflow, claimed.seq, state, outcome, tool_error)
        self._finishing.append(claimed)

    # ---- requests that will get no answer ------------------------------------------------------------------

    def upstream_gone(self, exit_status: str) -> list[bytes]:
        """Error replies for every request still in flight; their journal rows stay PENDING (in doubt)."""
        out: list[bytes] = []
        for entry in self._in_flight.take_all():
            if entry.track is not Track.PROBE:  # the call waiting for a probe is answered itself
                out.extend(self._abandoned(entry, exit_status))
        return out

    def stopped(self, why: str) -> list[bytes]:
        """At shutdown: error replies for every request still in flight (journaled calls stay PENDING)."""
        out: list[bytes] = []
        for entry in self._in_flight.take_all():
            claimed = entry.claimed
            if claimed is not None and self._calls is not None:
                self._calls.finished(claimed)
            if not entry.cancelled and entry.track is not Track.PROBE:
                refusal = Stopped(
                    workflow=claimed.workflow if claimed else None,
                    seq=claimed.seq if claimed else None,
                    tool=claimed.tool if claimed else None,
                    why=why,
                )
                out.append(error_line(entry.ident, refusal.to_error()))
        return out

    def abandon(self, ident: Any, reason: str) -> list[bytes]:
        """The error reply for one request in flight that will get no answer (its exchange with the upstream
        broke); a journaled call's row stays PENDING (in doubt). Nothing if no such request is in flight."""
        key = id_key(ident)
        entry = self._in_flight.pop(key, None) if key is not None else None
        if entry is not None and entry.track is Track.PROBE:
            pending = entry.pending
            return self._probe_concluded(pending, None, f"the probe got no answer: {reason}") if pending else []
        return self._abandoned(entry, reason) if entry is not None else []

    def _abandoned(self, entry: InFlight, reason: str) -> list[bytes]:
        claimed = entry.claimed
        if claimed is not None and self._calls is not None:
            self._calls.finished(claimed)
            if self._journal is not None and self._journal.replica_id is not None and self._unit is not None:
                # A gateway replica gives the call up, so that other replicas see it in doubt, not in flight.
                self._unit.disown(claimed.workflow, claimed.seq)
        if entry.cancelled:
            return []
        refusal = UpstreamExited(
            workflow=claimed.workflow if claimed else None,
            seq=claimed.seq if claimed else None,
            tool=claimed.tool if claimed else None,
            exit_status=reason,
        )
        return [error_line(entry.ident, refusal.to_error())]

    # ---- asking a call's user for its approval (``approve = "elicit"``, ``asking.py``) -----------------------

    def _ask_user(
        self, message: Message, line: bytes, refusal: ApprovalRequired, rule: ToolRule, out: ClientBatch
    ) -> bool:
        """Hold a call refused for want of an approval its user may give (``approve = "elicit"``) and ask them;
        False when the refusal stands."""
        asker, params = self._asker, message.params
        awaiting = refusal.data.get("reason") == "awaiting_approval"
        if asker is None or not awaiting or rule.approve is not Approve.ELICIT:
            return False
        meta = params.get("_meta")
        if isinstance(meta, dict) and asks_in_form(meta.get(CAPABILITIES_META)):  # 2026-07-28: one more round
            approval = int(refusal.data["approval"])
            out.to_client.append(input_required(message.id, params["name"], params.get("arguments") or {}, approval))
            return True
        if not asks_in_form(self.hello.get("capabilities")):
            return False
        request, ask_id = asker.ask(message, line, refusal)
        self._in_flight.track(Track.ASKING, message.id)
        self._timers.append((ask_id, ASK_TIMEOUT))
        out.to_client.append(request)
        return True

    def _waiting_call(self, ident: Any) -> bool:
        """True (and it is no longer in flight) when the call held by our elicitation still waits: not cancelled."""
        key = request_key(ident)
        entry = self._in_flight.get(key)
        if entry is None or entry.track is not Track.ASKING:
            return False
        del self._in_flight[key]
        return True

    def _user_answered(
        self, message: Message, out: ClientBatch, upward: list[tuple[bytes, InFlight | None, int]]
    ) -> None:
        """The user's answer decides the call's request; the call then goes through the checks again in the same
        request (granted: it runs; denied: refused), or gets the operator path's refusal."""
        assert self._asker is not None
        answered = self._asker.answered(message)
        if answered is None:
            return  # late: the call already had the operator path's refusal
        asking, answer = answered
        if not self._waiting_call(asking.message.id):
            return  # the call was cancelled meanwhile: it must not run, and nothing is decided
        if self._asker.decide(asking.approval, answer):
            self._call_line(asking.message, asking.line, out, upward, ask=False)
        else:
            out.to_client.append(asking.refusal)

    def _user_silent(self, ask_id: str) -> list[bytes]:
        """Our request ``ask_id`` got no answer in time: withdraw it; its call gets the operator path's refusal."""
        assert self._asker is not None
        asking = self._asker.expired(ask_id)
        if asking is None or not self._waiting_call(asking.message.id):
            return []
        logger.warning("approval #%d: the client's user did not answer within %gs", asking.approval, ASK_TIMEOUT)
        return [withdrawn(ask_id, f"no answer within {ASK_TIMEOUT:g}s"), asking.refusal]
