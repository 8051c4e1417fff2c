"""The session server: save and load the agent's working state as ``<project>/.claude-checkpoint``.

``model`` (the file, v1 + migrations) · ``root`` (which folder is the project) · ``store`` (crash-safe I/O
and the backup) · ``git`` (snapshot, blob hashes, drift) · ``redact`` · ``merge`` (replace/merge and the
limits) · ``render`` (the brief) · ``service`` (save and load end to end) · ``server`` (the MCP tools).
Only ``server`` imports the MCP SDK, so ``checkpoint brief`` starts fast.
"""
