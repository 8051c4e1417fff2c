"""Where Checkpoint meets the operating system: one small module for each concern that differs by platform.

``host`` is the one place that asks which platform this is (``sys.platform``, and ``CHECKPOINT_PORTABLE=1``,
which makes Linux take the paths macOS and Windows take wherever they can run here, so the tests run them);
every other module asks ``host.HOST`` which path to take. The seams: ``locks`` (who holds a file), ``files``
(owner-only modes and durable writes), ``signals`` (SIGTERM and SIGINT reach the event loop), ``stdio`` (pipes
pumped by the loop or by threads, into the same protocols), ``commands`` (the shell that runs ``--upstream-cmd``
and how a command line is quoted), ``paths`` (the user's folders). The upstream's process tree is the sixth
seam, kept with the upstream in ``upstream/stdio/`` (``process.py`` chooses, from ``host.HOST``).

A module for one platform opens with ``assert sys.platform …``: it tells the type checker which platform to
check it for (CI runs ``mypy --platform win32`` and ``--platform darwin`` too), and it fails loudly if imported
where it cannot work. May import only the standard library (and, on Windows, pywin32); nothing of ours
outside this room, so every room may import it.
"""
