"""The proxy's CPU per call, in-process: the interceptor and its parts, without pipes, processes or the loop.

It feeds prepared lines straight to ``Interceptor.from_client`` / ``from_upstream`` (what the relay does for each
read) and times them, once with the journal on the benchmark's disk (durable commits) and once on ``/dev/shm``
(tmpfs: an fsync costs nothing there, so what is left is CPU), one call per batch and 32 per batch. Then it
times the pieces a journaled call goes through, each alone, and lists the top functions of a cProfile run.

``--sub-rules`` (issue 43) times a shell tool's calls under a tool policy: its own table alone, then with one
sub-rule of 40 command prefixes, then with the sub-rules `init` writes for Desktop Commander's ``start_process``
(every family of commands that act beyond the machine), on a short command and on a chained one; each call's
command differs and falls to the tool's own rule (``repeat = "allow"``, as ``npm test`` does), so what is added
is the choice of the rule (``ToolRule.chosen``, once per call in ``Call.of``); and the choice alone. This section
counts the process's CPU time (``time.process_time_ns``), not the wall clock, so that a busy machine's other
processes do not count.

Run: ``.venv/bin/python benchmarks/micro.py [--quick] [--sub-rules]``; ``PYTHONPATH=/path/to/candidate/src``
measures a copy.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import checkpoint_mcp
from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.proxy_config import ProxyConfig
from checkpoint_mcp.journal.sqlite import SqliteJournal
from checkpoint_mcp.signature import call_signature
from checkpoint_mcp.wire import classify, compact_json, dumps, member_text, set_member
from harness import echo_call
from report import table
from stats import fmt, percentile

SHM = Path("/dev/shm")
RESULT = b'{"content":[{"type":"text","text":"ok"}],"isError":false}'


def reply(ident: int, result: bytes = RESULT) -> bytes:
    """The bundled upstream's answer to ``echo_call(ident)``."""
    return b'{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (ident, result)


def spaced_reply(ident: int, result: bytes = RESULT) -> bytes:
    """The same answer as Python's ``json.dumps`` writes it by default (``", "`` and ``": "``); ``result`` spaced."""
    return b'{"jsonrpc": "2.0", "id": %d, "result": %s}\n' % (ident, result)


def spaced(result: bytes) -> bytes:
    """``result`` as ``json.dumps`` writes it by default."""
    return json.dumps(json.loads(result)).encode()


SPACED_RESULT = spaced(RESULT)
BIG_RESULT = json.dumps({"content": [{"type": "text", "text": "x" * 100_000}], "isError": False}).encode()
BIG_COMPACT_RESULT = compact_json(json.loads(BIG_RESULT)).encode()
# The lines are made in the timed loop: each from prepared bytes by one %-format, alike for every shape.
SHAPES: dict[str, Callable[[int], bytes]] = {
    "compact reply": reply,
    "spaced reply (json.dumps default)": lambda ident: spaced_reply(ident, SPACED_RESULT),
    "compact reply, 100 KB result": lambda ident: reply(ident, BIG_COMPACT_RESULT),
    "spaced reply, 100 KB result": lambda ident: spaced_reply(ident, BIG_RESULT),
}


def per_call_us(
    run: Callable[[int], None], calls: int, repeats: int, clock: Callable[[], int] = time.perf_counter_ns
) -> float:
    """Median over ``repeats`` of the µs per call of ``run(calls)``, by ``clock`` (wall time unless told)."""
    samples = []
    for _ in range(repeats):
        start = clock()
        run(calls)
        samples.append((clock() - start) / calls / 1000)
    return percentile(sorted(samples), 0.5)


class Driver:
    """An interceptor with (or without) a journal, fed request and reply lines with fresh ids."""

    def __init__(
        self,
        journal_dir: Path | None,
        batch: int,
        answer: Callable[[int], bytes] = reply,
        relaxed: bool = False,
        policy: Any = None,
        request: Callable[[int], bytes] = echo_call,
    ) -> None:
        self.journal = SqliteJournal(str(journal_dir / "journal.db")) if journal_dir is not None else None
        path = self.journal.location if self.journal is not None else None
        config = ProxyConfig(upstream_cmd="unused", journal=path, relaxed_completions=relaxed, policy=policy)
        self.answer = answer
        self.request = request
        self._owner: Any = None
        journal: Any = self.journal  # typed against this tree's API; main's (16d5351+) takes a lineage instead
        if journal is not None and hasattr(journal, "lineage"):
            self._owner = journal.acquire(path)
            self.interceptor = Interceptor(config, journal, journal.lineage(path))
        else:
            self.interceptor = Interceptor(config, journal, path)
        self.batch = batch
        self.next_id = 1

    def run(self, calls: int) -> None:
        """``calls`` calls, ``batch`` requests per read and ``batch`` replies per read."""
        done = 0
        while done < calls:
            ids = range(self.next_id, self.next_id + self.batch)
            self.next_id += self.batch
            sent = self.interceptor.from_client([self.request(i) for i in ids])
            forwarded = sent.to_upstream + self.interceptor.flush().to_upstream
            if len(forwarded) != self.batch:
                raise RuntimeError(f"not forwarded: {sent}")
            self.interceptor.from_upstream([self.answer(i) for i in ids])
            self.interceptor.flush()
            done += self.batch

    def close(self) -> None:
        """Release the workflow and close the journal."""
        if self._owner is not None:
            self._owner.release()
        if self.journal is not None:
            self.journal.close()


def end_to_end(disk: Path, calls: int, repeats: int) -> list[list[str]]:
    """Rows: per-call µs of the interceptor for each journal placement and batch size."""
    rows = []
    for label, place in (("no journal (pass-through)", None), ("journal on /dev/shm (CPU only)", SHM)):
        for batch in (1, 32):
            rows.append([label, str(batch), fmt(_measure(place, batch, calls, repeats), 1)])
    for batch in (1, 32):
        rows.append([f"journal on {disk} (durable)", str(batch), fmt(_measure(disk, batch, calls // 4, 3), 1)])
    return rows


def shapes(calls: int, repeats: int) -> list[list[str]]:
    """Rows: per-call µs of the journaled interceptor on /dev/shm (CPU only) by reply shape, and relaxed."""
    rows = []
    for label, answer in SHAPES.items():
        n = calls // 8 if "100 KB" in label else calls
        rows.append([label, "1", fmt(_measure(SHM, 1, n, repeats, answer), 1)])
    for batch in (1, 32):
        rows.append(
            [
                "compact reply, --relaxed-completions",
                str(batch),
                fmt(_measure(SHM, batch, calls, repeats, relaxed=True), 1),
            ]
        )
    return rows


def _measure(
    place: Path | None,
    batch: int,
    calls: int,
    repeats: int,
    answer: Callable[[int], bytes] = reply,
    relaxed: bool = False,
    policy: Any = None,
    request: Callable[[int], bytes] = echo_call,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> float:
    with tempfile.TemporaryDirectory(dir=place) as tmp:
        driver = Driver(Path(tmp) if place is not None else None, batch, answer, relaxed, policy, request)
        try:
            driver.run(batch * 4)
            return per_call_us(driver.run, max(batch, calls - calls % batch), repeats, clock)
        finally:
            driver.close()


PREFIXES_40 = [f"tool{n} deploy" for n in range(39)] + ["git push"]
"""Forty command prefixes, the last of which a chained command could hide."""
SHORT = "npm test -- --shard=%d"
CHAINED = "cd /work/app && npm ci --no-audit && npm test -- --shard=%d | tee test.log"


def shell_policies() -> dict[str, Any]:
    """The policies of the sub-rules section, by label: the tool's own table, 40 prefixes, Desktop Commander's."""
    import tomllib

    from checkpoint_mcp.init.policies import Listing, written
    from checkpoint_mcp.init.profiles import profiles
    from checkpoint_mcp.intercept.policy import parse_policy

    own = '[tools.echo]\nrepeat = "allow"\n'
    prefixes = ", ".join(f'"{p}"' for p in PREFIXES_40)
    forty = (
        own + f'[[tools.echo.when]]\nname = "forty"\npointer = "/command"\nrepeat = "refuse"\nprefixes = [{prefixes}]\n'
    )
    desktop = next(p for p in profiles() if p.name == "desktop-commander")
    tools = [{"name": t, "annotations": dict(table.hints)} for t, table in desktop.tables.items()]
    text = written("dc", Listing(tools, {"name": "desktop-commander"})).text
    text = text.replace("tools.start_process", "tools.echo")
    return {
        "no policy": None,
        "the tool's own table (repeat = allow)": parse_policy(tomllib.loads(own), "own"),
        "+ 1 sub-rule of 40 prefixes": parse_policy(tomllib.loads(forty), "forty"),
        "+ Desktop Commander's sub-rules (init)": parse_policy(tomllib.loads(text), "dc"),
    }


def command_call(line: str) -> Callable[[int], bytes]:
    """``tools/call`` lines of ``echo`` whose ``command`` is ``line`` (one ``%d``: the call's id, so each differs)."""
    head = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"command":'
    encoded = (head + json.dumps(line) + "}}}\n").encode()
    return lambda ident: encoded % (ident, ident)


def sub_rules(calls: int, repeats: int) -> list[list[str]]:
    """Rows: per-call µs of the journaled interceptor on /dev/shm under each policy, and the rule's choice alone."""
    rows = []
    policies = shell_policies()
    for label, policy in policies.items():
        for shape, line in (("short", SHORT), ("chained", CHAINED)):
            us = _measure(SHM, 1, calls, repeats, policy=policy, request=command_call(line), clock=time.process_time_ns)
            rows.append([label, shape, fmt(us, 1)])
    for label, policy in list(policies.items())[1:]:
        rule = policy.rule_for("echo")
        for shape, line in (("short", SHORT), ("chained", CHAINED)):
            arguments = {"command": line % 7}

            def choose(n: int, rule: Any = rule, arguments: dict[str, Any] = arguments) -> None:
                for _ in range(n):
                    rule.chosen(arguments)

            us = per_call_us(choose, calls * 5, repeats, time.process_time_ns)
            rows.append([f"ToolRule.chosen alone: {label}", shape, fmt(us, 2)])
    return rows


def pieces(calls: int, repeats: int) -> list[list[str]]:
    """Rows: µs of each step a journaled call goes through, alone."""
    request = echo_call(7)
    answer = reply(7)
    text = answer.decode()
    meta = dumps({"workflow": "/tmp/journal.db", "seq": 7, "replayed": False})
    arguments: dict[str, Any] = {"n": 7}
    steps: list[tuple[str, Callable[[], object]]] = [
        ("classify(request line) (json.loads + Message)", lambda: classify(request)),
        ("classify(reply line)", lambda: classify(answer)),
        ("json.loads(reply line) alone", lambda: json.loads(answer)),
        ("call_signature (RFC 8785 + SHA-256)", lambda: call_signature("echo", arguments)),
        ("dumps(arguments)", lambda: dumps(arguments)),
        ("dumps(_meta info)", lambda: dumps({"workflow": "/tmp/journal.db", "seq": 7, "replayed": False})),
        ("utc_now()", utc_now),
        ("line.decode()", answer.decode),
        ("member_text(reply, result)", lambda: member_text(text, ("result",))),
        (
            "set_member(reply, result._meta.checkpoint/journal)",
            lambda: set_member(text, ("result", "_meta", "k"), meta),
        ),
    ]
    rows = []
    for name, step in steps:

        def run(n: int, step: Callable[[], object] = step) -> None:
            for _ in range(n):
                step()

        rows.append([name, fmt(per_call_us(run, calls, repeats), 2)])
    return rows


def profile(calls: int, top: int) -> str:
    """cProfile of journaled calls on /dev/shm, one per batch: the top functions by own time."""
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        driver = Driver(Path(tmp), 1)
        driver.run(100)
        profiler = cProfile.Profile()
        profiler.enable()
        driver.run(calls)
        profiler.disable()
        driver.close()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str]) -> int:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()), help="the 'disk' journal's dir")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the journaled path")
    parser.add_argument("--sub-rules", action="store_true", help="only the sub-rules section (issue 43)")
    args = parser.parse_args(argv)
    calls, repeats = (64, 2) if args.quick else (4000, 5)
    print(f"checkpoint_mcp from {Path(checkpoint_mcp.__file__).parent}\n")
    if args.sub_rules:
        header = ["A shell tool's calls, journaled on /dev/shm (CPU only)", "command", "CPU µs per call"]
        print(table(header, sub_rules(calls, repeats)))
        return 0
    header = ["Interceptor, in-process", "calls per read", "µs per call (both directions)"]
    print(table(header, end_to_end(args.tmp, calls, repeats)))
    print()
    header = ["Journaled on /dev/shm (CPU only), by reply", "calls per read", "µs per call (both directions)"]
    print(table(header, shapes(calls, repeats)))
    print()
    print(table(["Step of a journaled call, alone", "µs"], pieces(calls * 5, repeats)))
    if args.profile:
        print()
        print(profile(calls, 30))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
