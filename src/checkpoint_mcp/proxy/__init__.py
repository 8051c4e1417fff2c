"""The `checkpoint` command's process: the stdio relay on the client's side (``relay``) and its ``runner``.

A pump: it turns the client's stdio framing into lines, hands them to ``intercept/`` and drives an upstream from
``upstream/``. May import ``intercept/``, ``upstream/``, ``journal/`` (to open it); never ``gateway/``.
"""
