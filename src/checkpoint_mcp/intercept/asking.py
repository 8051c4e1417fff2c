"""Asking the client's user to approve a call, in the same request (``approve = "elicit"``).

A call of a tool whose policy says ``approve = "elicit"`` goes through the approval gate as any other
(``approvals.ApprovalGate``): with no usable approval it is refused, and that refusal has already made the call's
request durable (approval ``#N``, pending). Where the client declared the elicitation capability in form mode
(session eras: ``initialize``'s ``capabilities.elicitation``, form being the default where no mode is named), the
interceptor holds that refusal and sends the client an ``elicitation/create`` request of its own instead, naming
the tool and its exact arguments. A 2026-07-28 client declares its capabilities in each request's ``_meta``; it
is asked by a multi-round answer (``input_required`` with our elicitation under ``INPUT_KEY``, and ``#N`` in the
``requestState`` its retry carries back). A yes grants ``#N`` as a person's decision would, chained on the
workflow's hash chain with ``decided_by`` "the client's user (elicitation)":

* accept: ``#N`` is granted, and the call goes through the gate again in the same request, where it is reserved on
  that approval (used in the same transaction) and sent upstream; it runs once.
* decline, cancel, an error answer, an answer that is not one of those, or no answer within ``ASK_TIMEOUT``:
  nothing is decided; the call gets the held refusal, the operator path (``#N`` waits for a person, and the same
  call sent again asks the user again). A decline is not recorded as a person's denial because it need not be
  one: a headless client declines every elicitation by itself (`claude -p` answers ``decline`` when no one can
  be asked), and "a person denied this call, do not send it again" would then be false and a dead end, where
  the issue wants such clients on the operator path. A person who means no denies ``#N`` as an operator does.

Ours are the only requests with ids ``checkpoint-ask-<process tag>-<n>``; their answers (late ones too) never reach
the upstream, which did not ask.
What an elicitation answer is trusted for: that the client's user (not the model) approved this exact call; the
client is the one that shows the question to its user, so a client that answers elicitations itself is trusted as
its user.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any, NamedTuple

from checkpoint_mcp.errors import JournalError, UsageError
from checkpoint_mcp.intercept.approval_gate import ELICITED_BY
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.refusals import CallRefused
from checkpoint_mcp.signature import call_signature
from checkpoint_mcp.wire import Message, classify, dumps, encode, error_line

logger = logging.getLogger(__name__)

ASK_TIMEOUT = 300.0
"""Seconds a call waits for its user's answer; then it gets the operator path's refusal (a person decides)."""

INPUT_KEY = "checkpoint/approval"
"""The key of our elicitation in a 2026-07-28 ``input_required`` answer's ``inputRequests`` (and of its answer)."""

_STATE = "checkpoint-approval/"  # our requestState: this prefix, then the request's id
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
"""The request ``_meta`` key by which a 2026-07-28 client declares its capabilities (it sends no ``initialize``)."""
_OURS = f"checkpoint-ask-{secrets.token_hex(4)}-"  # the ids of this process's elicitations
_ask_ids = itertools.count(1)


class UserAnswer(enum.Enum):
    """What the client's user said to our elicitation."""

    ACCEPT = "accept"  # the request is granted; the call goes through the gate again
    DECLINE = "decline"  # the operator path (a headless client declines by itself: see the module's docstring)
    NONE = "none"  # cancel, an error, an unreadable answer or no answer in time: the operator path


class Asking(NamedTuple):
    """A client's tools/call held while its user is asked."""

    message: Message  # the client's tools/call, as classified
    line: bytes  # as it came
    approval: int  # the request the answer decides
    refusal: bytes  # the operator path's answer to the call


def asks_in_form(capabilities: Any) -> bool:
    """True when the client's capabilities declare elicitation in form mode (the default mode where the
    capability names none: 2025-06-18 has no modes, 2025-11-25 and 2026-07-28 have ``form`` and ``url``)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return False
    return "form" in elicitation or "url" not in elicitation


def question(tool: str, arguments: Mapping[str, Any], approval: int) -> str:
    """The message the client's user reads: the tool and its exact arguments, and what each answer does."""
    shown = json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True)
    return (
        f"The agent wants to call the tool {tool!r} with exactly these arguments:\n{shown}\n"
        f"Accept to run this call once (approval #{approval}); decline, and it does not run."
    )


def ask_params(tool: str, arguments: Mapping[str, Any], approval: int) -> dict[str, Any]:
    """Our ``elicitation/create`` params: form mode (no ``mode`` member, so 2025-06-18 clients read them too),
    asking for nothing but the answer itself."""
    return {"message": question(tool, arguments, approval), "requestedSchema": {"type": "object", "properties": {}}}


def ask_request(ask_id: str, tool: str, arguments: Mapping[str, Any], approval: int) -> bytes:
    """Our ``elicitation/create`` request (session eras)."""
    params = ask_params(tool, arguments, approval)
    return encode({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": params})


def input_required(ident: Any, tool: str, arguments: Mapping[str, Any], approval: int) -> bytes:
    """The answer that asks a 2026-07-28 client's user (a multi-round ``input_required`` result): our elicitation
    under ``INPUT_KEY``, and the request's id as ``requestState`` for the client's retry."""
    asked = {"method": "elicitation/create", "params": ask_params(tool, arguments, approval)}
    result = {
        "resultType": "input_required",
        "inputRequests": {INPUT_KEY: asked},
        "requestState": f"{_STATE}{approval}",
    }
    return encode({"jsonrpc": "2.0", "id": ident, "result": result})


def withdrawn(ask_id: str, why: str) -> bytes:
    """The notification that withdraws our request ``ask_id`` (its call no longer waits for the answer)."""
    params = {"requestId": ask_id, "reason": why}
    return (dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}) + "\n").encode()


def answer_of(body: Any) -> UserAnswer:
    """What a response to our elicitation says (anything but a result with action accept or decline: NONE)."""
    result = body.get("result") if isinstance(body, dict) else None
    action = result.get("action") if isinstance(result, dict) else None
    if action == "accept":
        return UserAnswer.ACCEPT
    return UserAnswer.DECLINE if action == "decline" else UserAnswer.NONE


class Asker:
    """The elicitations one interceptor has sent, until their answers come (or their time passes)."""

    def __init__(self, journal: Journal) -> None:
        self._store = journal.approvals
        self._waiting: dict[tuple[str, Any], Asking] = {}

    def ask(self, message: Message, line: bytes, refusal: CallRefused) -> tuple[bytes, str]:
        """Hold the call ``message`` refused by ``refusal`` (see ``wants``): our request to send the client, and
        its id (for the timer)."""
        ask_id = f"{_OURS}{next(_ask_ids)}"
        approval = int(refusal.data["approval"])
        params = message.params
        arguments = params.get("arguments") or {}
        held = error_line(message.id, refusal.to_error())
        self._waiting[("s", ask_id)] = Asking(message, line, approval, held)
        logger.info("call %s: asking the client's user to approve it (approval #%d)", params["name"], approval)
        return ask_request(ask_id, params["name"], arguments, approval), ask_id

    @staticmethod
    def owns(ident: Any) -> bool:
        """True when ``ident`` is the id of one of our requests (answered or not: a late answer is ours too, and
        never reaches the upstream, which did not ask)."""
        return isinstance(ident, str) and ident.startswith(_OURS)

    def answered(self, message: Message) -> tuple[Asking, UserAnswer] | None:
        """The response ``message`` to our request (``owns``): the call it held and what the user said; None when
        the request no longer waits (it timed out)."""
        asking = self._waiting.pop(("s", message.id), None)
        return (asking, answer_of(message.body)) if asking is not None else None

    def expired(self, ask_id: str) -> Asking | None:
        """Our request ``ask_id`` got no answer in time: the call it held, if it still waits."""
        return self._waiting.pop(("s", ask_id), None)

    def retried(self, message: Message) -> tuple[Message, bytes] | None:
        """A 2026-07-28 tools/call retried with our ``requestState`` (see ``input_required``): the user's answer
        decides the request, when the request is this exact call's (same tool, same arguments); then the call as
        it was first sent (our two members taken out: the upstream did not ask), to go through the gate again.
        None for any other call."""
        params = message.params
        state = params.get("requestState") if isinstance(params, dict) else None
        if not (isinstance(state, str) and state.startswith(_STATE) and state[len(_STATE) :].isdigit()):
            return None
        responses = params.get("inputResponses")
        response = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
        try:
            found = self._store.approval(int(state[len(_STATE) :]))
        except JournalError as exc:  # the gate, reading the journal again, answers the call
            logger.error("could not read approval request %r: %s", state, exc)
            found = None
        arguments = params.get("arguments") or {}
        if found is not None and found.tool == params.get("name") and isinstance(arguments, dict):
            with contextlib.suppress(ValueError):  # arguments that cannot be canonicalised: the gate says so
                if found.signature == call_signature(found.tool, arguments):
                    self.decide(found.id, answer_of({"result": response}))
        first = {
            **message.body,
            "params": {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")},
        }
        line = encode(first)
        return classify(line), line

    def decide(self, approval: int, answer: UserAnswer) -> bool:
        """Grant the call's request if the user accepted; True when the call is to go through the gate again,
        False for the operator path. Never raises: a request decided meanwhile stands (the gate reads it), and a
        journal that fails here fails the call's second pass through the gate, which says so."""
        if answer is not UserAnswer.ACCEPT:
            logger.info("approval #%d: the client's user answered %s; it waits for a person", approval, answer.value)
            return False
        try:
            self._store.decide_approval(approval, True, ELICITED_BY)
        except UsageError as exc:  # decided, used or expired meanwhile: the gate reads what is now true
            logger.info("the client's user answered approval #%d: %s", approval, exc)
        except JournalError as exc:
            logger.error("could not record the user's answer on approval #%d: %s", approval, exc)
        return True
