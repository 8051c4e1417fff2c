"""What happens to each message, for every transport: the one place that makes a journaling decision.

``interceptor.Interceptor`` routes the lines a pump hands it (forward, journal, replay, refuse) and holds what is
in flight (``inflight``); ``calls`` is the journaled life of one call (sequences, claims, replays, outcomes);
``results`` edits the results the proxy only routes (the server identity); ``messages`` checks single lines;
``traced`` shows a ``telemetry`` trace the lines crossing the interceptor (built only when telemetry is on);
``turns`` are the records a turn hands its pump (lines to write, calls to join, a flush begun); ``options``
holds the journaling flag the two pumps' commands share (``--relaxed-completions``); ``proxy_config`` is everything
the two commands were told (``ProxyConfig``, with the tool policies: settings that decide stay in this room).
Tool policies (`--policy`): ``policy`` reads and checks the file into frozen rules (``pointer``: JSON pointers),
``repeats`` is what a rule makes of a call that repeats a journaled one by its content, ``settle`` and
``settling`` settle an in-doubt call by a probe or an idempotency key, ``policy_report`` what
`checkpoint policy check` prints. Approval gates (``approve``): ``approvals`` finds, requests and uses a call's
approval; ``asking`` asks the client's user for it in the same request (``approve = "elicit"``).

May import: ``journal/``, ``config``, ``wire``, ``signature``, ``difference``, ``errors``, ``debug``, ``telemetry``.
Never a pump (``proxy/``, ``gateway/``) or a transport (``upstream/``): every way in and out drives the same
interceptor.
"""
