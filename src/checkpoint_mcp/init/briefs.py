"""How a new session of each client gets the resume brief: the hook or plugin `init` writes for it.

The kinds (a client's entry in ``clients.CLIENTS`` names its own as ``brief``):

- ``claude-settings``, ``gemini-settings``, ``codex-toml``: Claude Code's, Gemini CLI's and Codex's SessionStart
  hooks, written by ``plan``, ``gemini`` and ``codex`` (they read the project's journals from its own file);
- ``qwen-settings``: Qwen Code's ``hooks.SessionStart`` in the file of its servers, Gemini's shape; Qwen hands the
  model what the hook prints, Claude Code's JSON or plain text;
- ``copilot-hooks``: a file of its own, ``.github/hooks/checkpoint-brief.json``, whose ``sessionStart`` command
  prints ``{"additionalContext": …}``: the one output GitHub Copilot CLI passes to the model under ``-p``;
- ``cursor-hooks``: a ``sessionStart`` entry in ``.cursor/hooks.json``, printing ``{"additional_context": …}``;
- ``vscode-hooks``: VS Code's agent hooks (Preview) are read from ``.github/hooks/*.json``: a file of its own,
  ``.github/hooks/checkpoint-session-start.json``, whose ``SessionStart`` command (run at the first prompt of each
  chat, input ``sessionId`` and ``source: "new"``) prints Claude Code's ``hookSpecificOutput`` JSON, which VS Code
  reads;
- ``opencode-plugin``: OpenCode runs no shell hook at a session start, so `init` writes a plugin,
  ``.opencode/plugin/checkpoint-brief.js``, that adds the brief to the system prompt of a session's requests
  (computed once a session);
- ``cline-plugin``: Cline runs ``TaskStart`` hooks but hands their output to no model; a plugin's ``beforeRun``
  that returns ``appendContext`` reaches it: ``.cline/plugins/checkpoint-brief.js``, once a conversation.

The hooks and plugins of these four name the project and every journal the client's wrapped servers write to
(``checkpoint brief --project-root P --journal J --workflow-id W …``): a later `init` that wraps more servers
rewrites them, and a second `init` with nothing new writes the same bytes, so changes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.init import formats, gemini, wrap
from checkpoint_mcp.init.files import Change, load_json, render_json

COPILOT_HOOK_FILE: Final = os.path.join(".github", "hooks", "checkpoint-brief.json")
VSCODE_HOOK_FILE: Final = os.path.join(".github", "hooks", "checkpoint-session-start.json")
CURSOR_HOOKS: Final = os.path.join(".cursor", "hooks.json")
OPENCODE_PLUGIN: Final = os.path.join(".opencode", "plugin", "checkpoint-brief.js")
CLINE_PLUGIN: Final = os.path.join(".cline", "plugins", "checkpoint-brief.js")
PLUGIN_TIMEOUT_MS: Final = wrap.HOOK_TIMEOUT * 1000
KINDS: Final = (
    "claude-settings",
    "gemini-settings",
    "codex-toml",
    "qwen-settings",
    "copilot-hooks",
    "cursor-hooks",
    "vscode-hooks",
    "opencode-plugin",
    "cline-plugin",
)


@dataclass(frozen=True)
class Brief:
    """What the brief of one project needs: the project, the ``checkpoint`` to run, every journal to read."""

    project: str
    launcher: wrap.Launcher
    journals: tuple[tuple[str, str], ...]

    def argv(self, *hook: str) -> list[str]:
        """``checkpoint brief`` for this project and its journals (``hook``: the output's shape, for a hook)."""
        args = ["brief", *hook, "--project-root", self.project, *formats.pairs_args(self.journals)]
        return [self.launcher.command, *self.launcher.prefix, *args]

    def shell(self, *hook: str) -> str:
        """The same, as one shell command line."""
        return shlex.join(self.argv(*hook))


def owned_file(path: str, text: str) -> Change | None:
    """A file that is `init`'s alone (a plugin, a hook file), with ``text``; None when it holds it already.

    Raises:
        ClientConfigError: it cannot be read.
    """
    try:
        with open(path, "rb") as handle:
            before: bytes | None = handle.read()
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise ClientConfigError(path, f"cannot be read ({exc.strerror})") from exc
    after = text.encode("utf-8")
    return None if before == after else Change(path, before, after)


_PLUGIN_HEAD: Final = """\
// Written by `checkpoint init`: the Checkpoint resume brief (the side effects done and in doubt, the saved goal and
// tasks) at the start of every {client} session, in front of its wrapped MCP servers. A later `checkpoint init`
// rewrites this file; `checkpoint init --undo` removes it.
import {{ execFileSync }} from "node:child_process"

const BRIEF = {argv}

function brief() {{
  try {{
    const options = {{ encoding: "utf8", timeout: {timeout}, stdio: ["ignore", "pipe", "pipe"] }}
    return execFileSync(BRIEF[0], BRIEF.slice(1), options).trim()
  }} catch (error) {{
    console.error(`checkpoint brief failed: ${{error.message}}`)
    return ""
  }}
}}
"""

_OPENCODE_BODY: Final = """
// OpenCode runs no shell hook when a session starts: the brief joins the system prompt, computed once a session.
const briefs = new Map()

export const CheckpointBrief = async () => ({
  "experimental.chat.system.transform": async (input, output) => {
    const session = input?.sessionID ?? ""
    if (!briefs.has(session)) briefs.set(session, brief())
    const text = briefs.get(session)
    if (text) output.system.push(text)
  },
})
"""

_CLINE_BODY: Final = """
// Cline hands a TaskStart hook's output to no model; a plugin's beforeRun appendContext reaches it. Once a
// conversation (a resumed one, in a new process, gets it again).
const seen = new Set()

export default {
  name: "checkpoint-brief",
  manifest: { capabilities: ["hooks"] },
  hooks: {
    beforeRun: async ({ snapshot }) => {
      const conversation = snapshot?.conversationId ?? ""
      if (seen.has(conversation)) return undefined
      seen.add(conversation)
      const text = brief()
      return text ? { appendContext: text } : undefined
    },
  },
}
"""


def plugin_text(client: str, brief: Brief) -> str:
    """The plugin `init` writes for ``client`` (``opencode-plugin`` or ``cline-plugin``)."""
    label, body = ("OpenCode", _OPENCODE_BODY) if client == "opencode-plugin" else ("Cline", _CLINE_BODY)
    argv = json.dumps(brief.argv("--session-start", "startup"), ensure_ascii=False)
    return _PLUGIN_HEAD.format(client=label, argv=argv, timeout=PLUGIN_TIMEOUT_MS) + body


def copilot_hooks_text(brief: Brief) -> str:
    """Copilot CLI's hook file: one ``sessionStart`` command printing ``{"additionalContext": …}``."""
    hook = {"type": "command", "bash": brief.shell("--hook", "--hook-format", "copilot"), "timeoutSec": 10}
    return json.dumps({"version": 1, "hooks": {"sessionStart": [hook]}}, indent=2, ensure_ascii=False) + "\n"


def vscode_hooks_text(brief: Brief) -> str:
    """VS Code's hook file: one ``SessionStart`` command printing ``hookSpecificOutput`` (Claude Code's shape, which
    VS Code reads)."""
    hook = {"type": "command", "command": brief.shell("--hook"), "timeout": wrap.HOOK_TIMEOUT}
    return json.dumps({"hooks": {"SessionStart": [hook]}}, indent=2, ensure_ascii=False) + "\n"


def _is_brief_command(command: object) -> bool:
    return isinstance(command, str) and "checkpoint" in command and " brief " in f"{command} " and "--hook" in command


def cursor_hooks(path: str, brief: Brief) -> Change | None:
    """``.cursor/hooks.json`` with a ``sessionStart`` hook printing the brief (``{"additional_context": …}``), or
    its command brought up to date; None when it is right. Every other hook is kept.

    Raises:
        ClientConfigError: the file cannot be read, or is not of the shape Cursor reads.
    """
    loaded = load_json(path)
    if not isinstance(loaded.value, dict):
        raise ClientConfigError(path, "the file is not a JSON object")
    document = copy.deepcopy(loaded.value)
    document.setdefault("version", 1)
    hooks = document.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ClientConfigError(path, "'hooks' is not an object")
    starts = hooks.setdefault("sessionStart", [])
    if not isinstance(starts, list):
        raise ClientConfigError(path, "'hooks.sessionStart' is not a list")
    command = brief.shell("--hook", "--hook-format", "cursor")
    ours = [hook for hook in starts if isinstance(hook, dict) and _is_brief_command(hook.get("command"))]
    if ours:
        ours[0]["command"] = command
    else:
        starts.append({"command": command})
    return None if document == loaded.value else Change(path, loaded.raw, render_json(document, loaded.raw))


def settings_hook(document: dict[str, Any], path: str, brief: Brief) -> bool:
    """Qwen Code's ``hooks.SessionStart`` in its settings (Gemini's shape) runs the brief: added, or its command
    brought up to date. Returns whether the document changed.

    Raises:
        ClientConfigError: the hooks are not of the shape Qwen reads.
    """
    command = brief.shell("--hook")
    for group, ours in wrap.brief_groups(document):
        if ours:
            hook = group["hooks"][0]
            if hook.get("command") == command:
                return False
            hook["command"] = command
            return True
    problem = gemini.add_brief_hook(document, command)
    if problem is not None:
        raise ClientConfigError(path, problem)
    return True


def owned_changes(kind: str, brief: Brief) -> list[Change]:
    """The changes of a kind whose hook or plugin is a file of `init`'s own, or Cursor's hooks file.

    Raises:
        ClientConfigError: a file cannot be read, or is not of its client's shape.
    """
    project = brief.project
    change: Change | None = None
    if kind == "opencode-plugin":
        change = owned_file(os.path.join(project, OPENCODE_PLUGIN), plugin_text(kind, brief))
    elif kind == "cline-plugin":
        change = owned_file(os.path.join(project, CLINE_PLUGIN), plugin_text(kind, brief))
    elif kind == "copilot-hooks":
        change = owned_file(os.path.join(project, COPILOT_HOOK_FILE), copilot_hooks_text(brief))
    elif kind == "cursor-hooks":
        change = cursor_hooks(os.path.join(project, CURSOR_HOOKS), brief)
    elif kind == "vscode-hooks":
        change = owned_file(os.path.join(project, VSCODE_HOOK_FILE), vscode_hooks_text(brief))
    return [] if change is None else [change]


def where(kind: str) -> str:
    """Where a kind's hook or plugin is, for the summary."""
    return {
        "opencode-plugin": f"the plugin {OPENCODE_PLUGIN}",
        "cline-plugin": f"the plugin {CLINE_PLUGIN}",
        "copilot-hooks": f"the sessionStart hook {COPILOT_HOOK_FILE}",
        "cursor-hooks": f"the sessionStart hook in {CURSOR_HOOKS}",
        "vscode-hooks": f"the SessionStart agent hook {VSCODE_HOOK_FILE}",
        "qwen-settings": "the SessionStart hook `checkpoint brief --hook`",
    }.get(kind, "the SessionStart hook `checkpoint brief --hook`")


def unique(journals: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Each (journal, workflow) pair once, in order."""
    seen: list[tuple[str, str]] = []
    for pair in journals:
        if pair not in seen:
            seen.append(pair)
    return tuple(seen)
