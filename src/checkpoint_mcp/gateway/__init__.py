"""`checkpoint serve`: the journaling proxy as an MCP gateway over Streamable HTTP, for fleets of agents.

``app`` builds the Starlette application (routes and guards), ``endpoint`` serves the MCP endpoint in both
protocol eras, ``sessions`` holds the sessions and workflow channels, ``backend`` is the one interface the
endpoint hands a session's or workflow's messages to, ``channel`` pumps one upstream through its interceptor (as
the stdio relay does), ``runner`` serves it all with uvicorn. For a platform: ``tokens`` checks access tokens from
an identity provider (``security.TokenAuth`` is the guard), ``principals`` says which journal workflow a
principal's request is journaled in, ``upstreams_file`` reads ``--upstreams`` and ``federation`` puts those
upstreams behind one session or workflow, one channel each (a ``Backend`` too).

A pump, like ``proxy/``: it may import ``intercept/``, ``upstream/``, ``journal/`` and ``ui/`` (the pages it
mounts); never ``proxy/``. The two pumps share only the interceptor and the upstreams.
"""
