"""A guess from a tool's name alone, for a tool whose server gives no hints at all: does the name say it reads?

Many servers annotate none of their tools (the npm GitHub server's 26, for one). Taken as destructive, their
``get_issue`` and ``search_code`` would be refused when an agent reads again, and told to "use that result", a
stale one. So a tool without a single hint whose name says it reads, and says nothing of changing anything, is
written as a read (``journal = false``), with a comment saying the guess came from its name.

The name is cut into words at ``_``, ``-``, ``.``, ``/``, spaces and camelCase humps (``getIssue``,
``search-docs``, ``kb.query``), and compared word by word, lower-cased, with two lists (docs/policies.md shows
them): it reads when one word is a word of ``READ_WORDS`` and none is a word of ``CHANGE_WORDS``. Whole words
only: ``listen`` is not ``list``, ``settings`` is not ``set``. The change words win, so ``get_and_delete``,
``create_list`` and ``send_search_report`` are not reads. A wrong guess one way refuses a harmless repeat from a
later session; the other way lets a repeated side effect run, so the change words are many and the read words
few, and a noun that is also a verb in the change list (``post``) makes a read look like a change, never the
reverse.
"""

from __future__ import annotations

import re
from typing import Final

READ_WORDS: Final = frozenset(
    {
        "get", "list", "search", "read", "find", "query", "describe", "show", "view", "lookup", "count", "fetch",
        "retrieve", "inspect", "browse", "preview", "peek",
    }
)  # fmt: skip
"""Words that say a tool reads, wherever they stand in its name."""

CHANGE_WORDS: Final = frozenset(
    {
        # make, change, remove
        "create", "add", "insert", "new", "make", "generate", "update", "edit", "modify", "change", "patch",
        "replace", "set", "unset", "put", "write", "save", "store", "upload", "import", "upsert", "append",
        "delete", "remove", "rm", "del", "drop", "destroy", "purge", "clear", "erase", "reset", "truncate", "wipe",
        "increment", "decrement", "toggle", "mark", "move", "mv", "rename", "copy", "cp", "archive", "unarchive",
        "restore", "attach", "detach", "link", "unlink",
        # tell someone
        "send", "post", "publish", "notify", "reply", "forward", "invite", "share", "comment",
        # version control
        "push", "pull", "merge", "commit", "rebase", "checkout", "revert", "fork", "clone", "apply", "tag",
        # decide, pay, order
        "approve", "reject", "accept", "decline", "close", "reopen", "assign", "unassign", "grant", "revoke",
        "lock", "unlock", "pay", "charge", "refund", "buy", "purchase", "transfer", "cancel", "submit", "book",
        "schedule", "enqueue", "dequeue", "sign", "vote", "like", "star", "unstar", "follow", "unfollow",
        "subscribe", "unsubscribe", "register", "login", "logout",
        # run something
        "run", "exec", "execute", "invoke", "trigger", "start", "stop", "kill", "restart", "deploy", "install",
        "uninstall", "enable", "disable", "sync",
        # act on a page
        "click", "press", "fill", "navigate", "drag", "tap",
    }
)  # fmt: skip
"""Words that say a tool changes something: one of them in a name, and it is not guessed to be a read."""

_SEPARATORS: Final = re.compile(r"[^A-Za-z0-9]+")
_HUMPS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """The words of a tool's name, lower-cased: ``getIssue_comments`` is ``get``, ``issue``, ``comments``."""
    return [hump.lower() for part in _SEPARATORS.split(name) for hump in _HUMPS.findall(part)]


def read_word(name: str) -> str | None:
    """The word that makes ``name`` read as a read (the first), or None when it does not, or also says it
    changes something."""
    found = words(name)
    if any(word in CHANGE_WORDS for word in found):
        return None
    return next((word for word in found if word in READ_WORDS), None)
