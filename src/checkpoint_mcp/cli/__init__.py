"""The `checkpoint` command: thin click adapters over the library (``main`` holds the group and the proxy,
``serve``, ``session`` and ``brief``; ``operator`` the `checkpoint journal …` commands; ``journal`` what they
share and ``verify``; ``policy`` and ``reconcile`` the tool policies' commands). Each opens its resource, makes
one library call, and turns a ``CheckpointError`` into a ``click.ClickException``. Every room may be used from
here; nothing imports the command back."""

from checkpoint_mcp.cli.main import main

__all__ = ["main"]
