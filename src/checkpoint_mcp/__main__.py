"""`python -m checkpoint_mcp` is the `checkpoint` command."""

from checkpoint_mcp.cli import main

if __name__ == "__main__":
    main()
