"""`checkpoint serve`: the journaling proxy as an MCP gateway over Streamable HTTP, for fleets of agents.

``app`` builds the Starlette application (routes and guards), ``endpoint`` serves the MCP endpoint in both
protocol eras, ``sessions`` holds the sessions and workflow channels, ``channel`` pumps one upstream through
its interceptor (as ``proxy.relay`` does for stdio), ``runner`` serves it all with uvicorn.
"""
