"""A local upstream: ``/bin/sh -c CMD`` as a child process over pipes (``child``), started early (``process``),
its whole process tree held by a keeper (``keeper``) so nothing outlives the proxy; ``pipes`` are the non-blocking
line readers and writers that the stdio relay shares. Imports only the standard library and ``upstream.base``."""
