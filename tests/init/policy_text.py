"""Reading the policy files `checkpoint init` writes, whose comments are wrapped to 120 characters."""

from __future__ import annotations


def comments(text: str) -> str:
    """The comment lines of a policy file, joined into one text, as a reader reads them."""
    return " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
