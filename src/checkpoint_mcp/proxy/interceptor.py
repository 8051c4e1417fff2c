"""What the proxy does with each line: forward it as is, or journal, replay or refuse a tools/call.

The interceptor is synchronous and does no I/O of its own except through the journal: the relay hands it the
complete lines read in one go from one side and writes what it returns. All the journal writes for one batch
of lines share one durable commit (group commit), and nothing that depends on them is returned before that
commit: a PENDING row is durable before the upstream sees the call, a COMPLETED row before the client sees
the reply.
"""

from __future__ import annotations

import enum
import json
import logging
import shlex
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.errors import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallRefused,
    Divergence,
    DuplicateRequestId,
    InDoubt,
    InvalidCallParams,
    JournalError,
    JournalWriteFailed,
    UpstreamExited,
)
from checkpoint_mcp.journal.base import (
    REDACTED_ARGUMENTS,
    CallRecord,
    CallState,
    Diverge,
    InDoubtAt,
    Journal,
    JournalBatch,
    Proceed,
    decide,
)
from checkpoint_mcp.proxy.config import ProxyConfig
from checkpoint_mcp.signature import call_signature
from checkpoint_mcp.wire import (
    Kind,
    Message,
    WireParseError,
    classify,
    dumps,
    error_line,
    id_key,
    member_text,
    raw_response_line,
    set_member,
)

logger = logging.getLogger(__name__)

META_KEY = "checkpoint/journal"
"""The ``_meta`` key under which every journaled result says ``{"workflow", "seq", "replayed"}``."""
SEQ_HINT = "checkpoint_seq"
"""The ``params._meta`` key by which a client names the sequence a tools/call must take."""
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def resolve_command(journal: str, workflow: str, seq: int) -> str:
    """The operator command that reconciles the call at ``seq`` (shown in in-doubt and divergence errors)."""
    base = f"checkpoint journal resolve --journal {shlex.quote(journal)} {shlex.quote(workflow)} {seq}"
    return f"{base} (--completed --result-file FILE | --failed --message TEXT | --release)"


class _Track(enum.Enum):
    """Why a request from the client is remembered until its response comes back."""

    PLAIN = "plain"  # forwarded as is; remembered only to answer it if the upstream dies
    TOOL_CALL = "tool_call"  # a journaled tools/call
    INITIALIZE = "initialize"  # its result carries the server identity (handshake era)
    DISCOVER = "discover"  # its result carries the server identity (2026-07-28)
    TOOLS_LIST = "tools_list"  # its result carries the tools' annotations (--trust-annotations)


@dataclass(slots=True)
class _InFlight:
    track: _Track
    ident: Any
    seq: int = 0
    tool: str = ""
    signature: str = ""
    cancelled: bool = False
    continued: bool = False  # a 2026-07-28 retry with inputResponses: its row was reserved by the first round


@dataclass(slots=True)
class _AwaitingInput:
    """A 2026-07-28 call that answered ``input_required``: its retry continues the same journal entry."""

    seq: int
    tool: str
    signature: str
    request_state: str | None


@dataclass(slots=True)
class ClientBatch:
    """What to write after one batch of client lines, in order."""

    to_upstream: list[bytes] = field(default_factory=list)
    to_client: list[bytes] = field(default_factory=list)
    journaled: bool = False  # a PENDING row was committed for a call in ``to_upstream``


class Interceptor:
    """The routing and journaling logic of one proxy process."""

    def __init__(self, config: ProxyConfig, journal: Journal | None, workflow: str | None) -> None:
        self._config = config
        self._journal = journal
        self._workflow = workflow or ""
        self._location = journal.location if journal is not None else ""
        self._cursor = journal.max_seq(self._workflow) + 1 if journal is not None else 1
        self._in_flight: dict[tuple[str, Any], _InFlight] = {}
        self._awaiting: list[_AwaitingInput] = []
        self._read_only: dict[str, bool] = {}
        self._identity = {"name": config.server_name, "version": config.server_version}

    @property
    def cursor(self) -> int:
        """The sequence the next call without ``checkpoint_seq`` will take."""
        return self._cursor

    def outstanding(self) -> int:
        """Requests from the client still waiting for an answer (cancelled ones excluded)."""
        return sum(1 for entry in self._in_flight.values() if not entry.cancelled)

    # ---- client -> upstream -------------------------------------------------------------------------------

    def from_client(self, lines: list[bytes]) -> ClientBatch:
        """Route a batch of complete lines from the client."""
        out = ClientBatch()
        # (index in to_upstream, entry) for the PENDING rows of the open transaction
        reserved: list[tuple[int, _InFlight]] = []
        pending = _LazyBatch(self._journal)
        for line in lines:
            try:
                message = classify(line)
            except WireParseError as exc:
                if line.strip():
                    out.to_client.append(error_line(None, {"code": PARSE_ERROR, "message": f"parse error: {exc}"}))
                else:
                    out.to_upstream.append(line)
                continue
            if message.kind is not Kind.REQUEST or message.method != "tools/call" or self._journal is None:
                self._route_other(message, line, out)
                continue
            try:
                entry = self._tool_call(message, pending, out)
            except JournalError as exc:
                pending.abort(exc)
                self._refuse(out, reserved, str(exc), also=message)
                reserved = []
                continue
            if entry is not None:
                if entry.track is _Track.TOOL_CALL and not entry.continued:
                    reserved.append((len(out.to_upstream), entry))
                out.to_upstream.append(line)
        try:
            pending.commit()
        except JournalError as exc:
            self._refuse(out, reserved, str(exc))
            return out
        if reserved:
            out.journaled = True
            debug.trigger("after_pending_commit")
        return out

    def _refuse(
        self, out: ClientBatch, reserved: list[tuple[int, _InFlight]], cause: str, also: Message | None = None
    ) -> None:
        """Answer every call whose PENDING row was lost with a journal-write error; none reaches the upstream."""
        logger.error("journal write failed; refusing %d call(s): %s", len(reserved) + (also is not None), cause)
        drop = {index for index, _ in reserved}
        out.to_upstream = [line for index, line in enumerate(out.to_upstream) if index not in drop]
        refused: list[tuple[Any, int | None, str]] = [(entry.ident, entry.seq, entry.tool) for _, entry in reserved]
        if also is not None:
            params = also.params if isinstance(also.params, dict) else {}
            refused.append((also.id, None, str(params.get("name", ""))))
        for ident, seq, tool in refused:
            self._in_flight.pop(id_key(ident), None)
            refusal = JournalWriteFailed(workflow=self._workflow, seq=seq, tool=tool, cause=cause)
            out.to_client.append(error_line(ident, refusal.to_error()))

    def _route_other(self, message: Message, line: bytes, out: ClientBatch) -> None:
        kind = message.kind
        if kind is Kind.REQUEST:
            track = _TRACK_BY_METHOD.get(message.method or "", _Track.PLAIN)
            if message.method == "tools/call":
                refusal = self._tools_call_problem(message)
                if refusal is not None:
                    out.to_client.append(error_line(message.id, refusal.to_error()))
                    return
            self._in_flight[id_key(message.id)] = _InFlight(track, message.id)
        elif kind is Kind.NOTIFICATION:
            if message.method == "notifications/cancelled":
                self._mark_cancelled(message.params)
            elif message.method == "tools/call":
                # A tools/call without an id cannot be answered, so it could run unseen: never forward it.
                logger.warning("dropped a tools/call without an id: it cannot be answered or journaled")
                return
        elif kind is Kind.BATCH and self._journal is not None and _batch_has_tool_call(message.body):
            error = {
                "code": INVALID_REQUEST,
                "message": "JSON-RPC batches containing tools/call cannot be journaled; send one message per line",
            }
            out.to_client.append(error_line(None, error))
            return
        elif kind is Kind.OTHER and not isinstance(message.body, dict):
            out.to_client.append(
                error_line(None, {"code": INVALID_REQUEST, "message": "invalid request: not a JSON-RPC message"})
            )
            return
        out.to_upstream.append(line)

    def _mark_cancelled(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            return
        key = id_key(params["requestId"])
        entry = self._in_flight.get(key)
        if entry is None:
            return
        if entry.track is _Track.TOOL_CALL:
            # Keep it: if the upstream still answers, the answer is journaled as usual.
            entry.cancelled = True
        else:
            del self._in_flight[key]

    @staticmethod
    def _tools_call_problem(message: Message) -> InvalidCallParams | None:
        params = message.params
        if not isinstance(params, dict):
            return InvalidCallParams("invalid params: tools/call needs a params object")
        name = params.get("name")
        if not isinstance(name, str) or not name:
            return InvalidCallParams("invalid params: tools/call needs a non-empty string `name`")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return InvalidCallParams(f"invalid params: `arguments` of {name!r} must be an object")
        return None

    def _tool_call(self, message: Message, pending: _LazyBatch, out: ClientBatch) -> _InFlight | None:
        """Decide one journaled tools/call. Returns the entry to forward, or None if answered here.

        Raises:
            JournalError: the journal could not be read or written.
        """
        ident = message.id
        try:
            entry = self._claim(message, pending)
        except CallRefused as refusal:
            out.to_client.append(error_line(ident, refusal.to_error()))
            return None
        if isinstance(entry, bytes):
            out.to_client.append(entry)
            return None
        return entry

    def _claim(self, message: Message, pending: _LazyBatch) -> _InFlight | bytes:
        """Give the call its sequence and consult the journal; a bytes result is the answer to send back.

        Raises:
            CallRefused: the call is invalid, in doubt, or divergent.
        """
        problem = self._tools_call_problem(message)
        if problem is not None:
            raise problem
        params: dict[str, Any] = message.params
        name: str = params["name"]
        arguments: dict[str, Any] = params.get("arguments") or {}
        hint = _seq_hint(params)
        key = id_key(message.id)
        if key in self._in_flight:
            raise DuplicateRequestId(message.id)
        if self._config.trust_annotations and self._read_only.get(name) is True:
            self._in_flight[key] = _InFlight(_Track.PLAIN, message.id)
            return self._in_flight[key]
        try:
            signature = call_signature(name, arguments)
        except ValueError as exc:
            raise InvalidCallParams(f"invalid params: arguments of {name!r} cannot be canonicalised: {exc}") from exc
        if "inputResponses" in params or "requestState" in params:
            continued = self._continuation(signature, hint, params.get("requestState"))
            if continued is not None:
                entry = _InFlight(_Track.TOOL_CALL, message.id, continued.seq, name, signature, continued=True)
                self._in_flight[key] = entry
                return entry
        seq = hint if hint is not None else self._cursor
        self._cursor = max(self._cursor, seq + 1)
        batch = pending.get()
        record = batch.read(self._workflow, seq)
        decision = decide(record, signature)
        if isinstance(decision, Proceed):
            stored = REDACTED_ARGUMENTS if self._config.redact_args else dumps(arguments)
            batch.reserve(self._workflow, seq, name, stored, signature)
            entry = _InFlight(_Track.TOOL_CALL, message.id, seq, name, signature)
            self._in_flight[key] = entry
            return entry
        if isinstance(decision, InDoubtAt):
            raise InDoubt(
                workflow=self._workflow,
                seq=seq,
                tool=decision.record.tool,
                journaled_at=decision.record.started_at,
                resolve=resolve_command(self._location, self._workflow, seq),
                in_flight_here=any(e.track is _Track.TOOL_CALL and e.seq == seq for e in self._in_flight.values())
                or any(a.seq == seq for a in self._awaiting),
            )
        if isinstance(decision, Diverge):
            raise self._divergence(decision.record, name, arguments, signature)
        return self._replay_line(message.id, decision.record)

    def _continuation(self, signature: str, hint: int | None, request_state: Any) -> _AwaitingInput | None:
        candidates = [a for a in self._awaiting if a.signature == signature and (hint is None or a.seq == hint)]
        if not candidates:
            return None
        exact = [a for a in candidates if a.request_state is not None and a.request_state == request_state]
        chosen = (exact or candidates)[0]
        self._awaiting.remove(chosen)
        return chosen

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
        note = None
        if self._config.on_divergence == "fork":
            note = "--on-divergence fork is not yet implemented, so the call is refused as in strict mode"
        return Divergence(
            workflow=self._workflow,
            seq=record.seq,
            journaled=journaled,
            received=received,
            difference=difference or ["arguments differ"],
            resolve=resolve_command(self._location, self._workflow, record.seq),
            note=note,
        )

    def _replay_line(self, ident: Any, record: CallRecord) -> bytes:
        outcome = record.outcome or "null"
        if record.state is CallState.FAILED:
            return raw_response_line(ident, "error", outcome)
        return raw_response_line(ident, "result", self._with_meta(outcome, record.seq, replayed=True))

    def _with_meta(self, result_text: str, seq: int, *, replayed: bool) -> str:
        info = dumps({"workflow": self._workflow, "seq": seq, "replayed": replayed})
        try:
            return set_member(result_text, ("_meta", META_KEY), info)
        except ValueError:
            return result_text  # not an object: nothing to annotate

    # ---- upstream -> client -------------------------------------------------------------------------------

    def from_upstream(self, lines: list[bytes]) -> list[bytes]:
        """Route a batch of complete lines from the upstream; journal the outcomes they carry."""
        if not self._in_flight:
            return lines
        out: list[bytes] = []
        finished: list[tuple[int, _InFlight, CallState, str]] = []  # (index in out, entry, state, outcome)
        for line in lines:
            entry = None
            message = None
            try:
                message = classify(line)
            except WireParseError:
                logger.warning("the upstream sent a line that is not JSON; forwarded as is")
            if message is not None and message.kind is Kind.RESPONSE:
                entry = self._in_flight.pop(id_key(message.id), None)
            if entry is None or message is None:
                out.append(line)
                continue
            if entry.track is _Track.TOOL_CALL:
                self._tool_result(entry, message, line, out, finished)
            else:
                out.append(self._plain_result(entry, message, line))
        if finished:
            self._record_outcomes(finished, out)
        return out

    def _tool_result(
        self,
        entry: _InFlight,
        message: Message,
        line: bytes,
        out: list[bytes],
        finished: list[tuple[int, _InFlight, CallState, str]],
    ) -> None:
        debug.trigger("after_upstream_reply")
        text = line.decode()
        body = message.body
        if "error" in body:
            finished.append((len(out), entry, CallState.FAILED, member_text(text, ("error",)) or "null"))
            out.append(line)
            return
        result = body.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            # Not a completion: the client will retry with inputResponses; the row stays PENDING until then.
            request_state = result.get("requestState")
            self._awaiting.append(_AwaitingInput(entry.seq, entry.tool, entry.signature, request_state))
            out.append(self._annotated(text, entry.seq))
            return
        finished.append((len(out), entry, CallState.COMPLETED, member_text(text, ("result",)) or "null"))
        out.append(self._annotated(text, entry.seq))

    def _annotated(self, text: str, seq: int) -> bytes:
        info = dumps({"workflow": self._workflow, "seq": seq, "replayed": False})
        try:
            return set_member(text, ("result", "_meta", META_KEY), info).encode()
        except ValueError:
            return text.encode()

    def _record_outcomes(self, finished: list[tuple[int, _InFlight, CallState, str]], out: list[bytes]) -> None:
        assert self._journal is not None
        try:
            with self._journal.batch() as batch:
                for _, entry, state, outcome in finished:
                    if not batch.finish(self._workflow, entry.seq, state, outcome):
                        logger.warning("call #%d was no longer PENDING when its answer came", entry.seq)
        except JournalError as exc:
            # The upstream has run the calls; hiding their answers would invite a retry, a second run.
            # Forward them; the rows stay PENDING, so a replay will say "in doubt", never re-run them.
            seqs = ", ".join(f"#{entry.seq}" for _, entry, _, _ in finished)
            logger.error("could not journal the outcome of call(s) %s (they stay in doubt): %s", seqs, exc)
            return
        debug.trigger("after_complete_commit")

    def _plain_result(self, entry: _InFlight, message: Message, line: bytes) -> bytes:
        result = message.body.get("result")
        if not isinstance(result, dict):
            return line
        if entry.track is _Track.TOOLS_LIST:
            self._remember_annotations(result.get("tools"))
            return line
        try:
            text = line.decode()
            if entry.track is _Track.INITIALIZE:
                for key, value in self._identity.items():
                    text = set_member(text, ("result", "serverInfo", key), dumps(value))
                return text.encode()
            if entry.track is _Track.DISCOVER:
                for key, value in self._identity.items():
                    text = set_member(text, ("result", "_meta", SERVER_INFO_META, key), dumps(value))
                return text.encode()
        except ValueError:
            logger.warning("could not set the server identity in a %s result", entry.track.value)
        return line

    def _remember_annotations(self, tools: Any) -> None:
        if not isinstance(tools, list):
            return
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                annotations = tool.get("annotations")
                hint = annotations.get("readOnlyHint") if isinstance(annotations, dict) else None
                self._read_only[tool["name"]] = hint is True

    # ---- the upstream is gone -----------------------------------------------------------------------------

    def upstream_gone(self, exit_status: str) -> list[bytes]:
        """Error replies for every request still in flight; their journal rows stay PENDING (in doubt)."""
        out: list[bytes] = []
        for entry in self._in_flight.values():
            if entry.cancelled:
                continue
            journaled = entry.track is _Track.TOOL_CALL
            refusal = UpstreamExited(
                workflow=self._workflow if journaled else None,
                seq=entry.seq if journaled else None,
                tool=entry.tool if journaled else None,
                exit_status=exit_status,
            )
            out.append(error_line(entry.ident, refusal.to_error()))
        self._in_flight.clear()
        return out


class _LazyBatch:
    """A journal transaction opened at the first call that needs it, shared by the rest of the batch."""

    def __init__(self, journal: Journal | None) -> None:
        self._journal = journal
        self._cm: AbstractContextManager[JournalBatch] | None = None
        self._batch: JournalBatch | None = None

    def get(self) -> JournalBatch:
        """The open transaction, opening it if needed.

        Raises:
            JournalError: the transaction could not be opened.
        """
        if self._batch is None:
            assert self._journal is not None
            cm = self._journal.batch()
            self._batch = cm.__enter__()
            self._cm = cm
        return self._batch

    def abort(self, exc: BaseException) -> None:
        """Roll the open transaction back, if any."""
        cm, self._cm, self._batch = self._cm, None, None
        if cm is not None:
            try:
                cm.__exit__(type(exc), exc, exc.__traceback__)
            except JournalError:
                logger.debug("rollback after a journal error failed too", exc_info=True)

    def commit(self) -> None:
        """Commit the open transaction, if any, durably.

        Raises:
            JournalError: the commit failed; nothing of the transaction is kept.
        """
        cm, self._cm, self._batch = self._cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)


_TRACK_BY_METHOD = {
    "initialize": _Track.INITIALIZE,
    "server/discover": _Track.DISCOVER,
    "tools/list": _Track.TOOLS_LIST,
}


def _seq_hint(params: dict[str, Any]) -> int | None:
    """``params._meta.checkpoint_seq`` as a positive integer, or None when absent.

    Raises:
        InvalidCallParams: it is present but not a positive integer.
    """
    meta = params.get("_meta")
    if not isinstance(meta, dict) or SEQ_HINT not in meta:
        return None
    value = meta[SEQ_HINT]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidCallParams(
            f"invalid params: _meta.{SEQ_HINT} must be a positive integer, got {dumps(value)}",
            {"reason": "invalid_checkpoint_seq", "received": value},
        )
    return value


def _batch_has_tool_call(items: list[Any]) -> bool:
    return any(isinstance(item, dict) and item.get("method") == "tools/call" for item in items)
