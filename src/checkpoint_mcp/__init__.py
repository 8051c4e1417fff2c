"""Checkpoint: make MCP agents crash-resumable.

Two halves in one package: the side-effect journal proxy (``checkpoint --upstream-cmd … --journal …``) and
the session-state server (``checkpoint session``).
"""

__version__ = "0.1.0"
