"""Tests of `checkpoint init`, mirroring src/checkpoint_mcp/init."""
