"""A member's server requests (sampling, elicitation, roots) under ids of the federation's own.

Each member numbers its requests to the client as it likes, so two members' may share an id. On the way to the
client each gets ``checkpoint-fed-N`` (``outgoing``); the client's answer is taken back to the member that asked,
under the id it had (``answered``). The same counter names the federation's own requests to its members.
"""

from __future__ import annotations

from checkpoint_mcp.wire import Kind, Message, WireParseError, classify, dumps, with_id


class Aliases:
    """The federation's ids: the server requests in flight to the client, and its own requests to the members."""

    def __init__(self) -> None:
        self._sent: dict[str, tuple[str, str]] = {}  # our id -> (member, its original id as JSON text)
        self._counter = 0

    def next_id(self) -> str:
        """A new id of the federation's own."""
        self._counter += 1
        return f"checkpoint-fed-{self._counter}"

    def outgoing(self, member: str, line: bytes) -> bytes:
        """A member's line on its way to the client: a server request gets an id of the federation's."""
        try:
            message = classify(line)
        except WireParseError:
            return line
        if message.kind is not Kind.REQUEST:
            return line
        alias = self.next_id()
        original, renamed = with_id(line.decode(), dumps(alias))
        if original is None:
            return line
        self._sent[alias] = (member, original)
        return renamed.encode()

    def answered(self, message: Message, line: bytes) -> tuple[str, bytes] | None:
        """The client's answer to one of those requests: the member that asked, and the answer under its own id
        (None: no request of ours has that id; it was answered already, or never asked)."""
        alias = message.id if isinstance(message.id, str) else None
        target = self._sent.pop(alias, None) if alias is not None else None
        if target is None:
            return None
        member, original = target
        _, restored = with_id(line.decode(), original)
        return member, restored.encode()
