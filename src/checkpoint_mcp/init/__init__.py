"""`checkpoint init`: put Checkpoint in front of the MCP servers a project already has, and take it away again.

``clients`` (the one table of clients: where each keeps its servers per scope, its entry format, how its
sessions get the brief, its quirks) · ``formats`` (each client's server entry read into the plain form and written
back) · ``wrap`` (one entry rewritten to run through ``checkpoint``, the session server, the SessionStart hook) ·
``briefs`` (the hooks and generated plugins that hand a new session the brief) · ``files`` (reading, diffs,
atomic writes, the kept originals and ``--undo``) · ``codex`` (Codex CLI's ``config.toml`` files, kept in their
layout by ``tomlkit``) · ``gemini`` (Gemini CLI's entries and hooks) · ``client_files`` (the run of a client the
table describes whole: OpenCode, Copilot CLI, Cline, Qwen Code) · ``policies`` (the active policy file written for
each server from its tools) · ``proposals`` (the table of one tool: from a reviewed profile, its hints, or its
name) · ``profiles`` (the reviewed profiles of well-known servers, shipped as TOML data) · ``read_names`` (whether
a tool's name says it reads) · ``beyond_the_machine`` (the shell commands that act beyond this machine, written as
sub-rules of a tool that runs shell commands, and whether a tool looks like one) · ``policy_overview`` (the
screenful init prints of the policies it wrote) · ``plan`` (the whole run: every file's new text decided before
anything is written) · ``command`` (the click command, which ``cli`` registers).

This room reads and writes client configuration files only. It imports ``errors`` and, for the journals a
session server should read, ``session.journals`` (and ``journal``'s default workflow name); never a pump, a
transport or the interceptor: the servers' tools are asked for by ``cli``, through the ``ToolLister`` it gives.
"""
