"""Tests of the session server, mirroring src/checkpoint_mcp/session."""
