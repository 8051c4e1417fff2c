"""The ways out to an upstream MCP server, behind one interface; a transport journals nothing and decides nothing."""
