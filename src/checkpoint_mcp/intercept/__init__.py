"""What happens to each message, for every transport: the one place that makes a journaling decision.

Open ``decision/`` first: the decision for one tools/call is an ordered tuple of small checks there (in flight,
replay, repeat, limit, budget, approval), each looking at a call built once (``decision/call.py``) and what the
journal and this process know of it (``decision/facts.py``), doing no I/O and changing nothing, and the verdicts a
check may give (``decision/verdicts.py``); what one client session was answered is ``decision/memory.py``.
``interceptor.Interceptor`` routes the lines a pump hands it, both ways, holds what must wait for a commit, and
carries out each verdict: it forwards a reserved call, answers from the journal (``answers``: the journal's
``_meta`` on results, replays), refuses, joins, settles, or asks for an approval. ``workflow`` is what one process
knows of a workflow's calls (where they go, which run here, which await input): it places a call before the
decision, and the interceptor applies to it what the decision said (the reservation, a fork, a continued call).

Around it: ``inflight`` (what is in flight), ``messages`` (checks of single lines), ``results`` (the server
identity in results it only routes), ``turns`` (what a turn hands its pump), ``traced`` (a ``telemetry`` trace
of the lines, built only when telemetry is on), ``proxy_config`` (everything the two commands were told, with
the tool policies). Tool policies (`--policy`) are data in ``policy/`` (the file's grammar, the rules, pointers,
a call's identity for repeats, what `checkpoint policy check` prints). An in-doubt call met again is settled by
its policy's declared means: ``settle_rules`` plans it and says what a probe proved (pure), ``settler`` carries it
out. Approval gates: ``approval_gate`` requests a call's approval and says what a call without one gets;
``asking`` asks the client's user for it in the same request (``approve = "elicit"``).

May import: ``journal/``, ``config``, ``wire``, ``signature``, ``difference``, ``errors``, ``refusals``, ``clock``,
``debug``, ``telemetry``. Never a pump (``proxy/``, ``gateway/``) or a transport (``upstream/``): every way in and
out drives the same interceptor.
"""
