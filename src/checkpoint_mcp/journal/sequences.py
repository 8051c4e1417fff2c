"""Sequences for `checkpoint serve` replicas: blocks of a workflow's shared counter, handed out locally.

Replicas on one PostgreSQL journal take a call's sequence (when the call names none) from the workflow's counter
in the database (``workflows.next_seq``), so no two replicas hand out the same one. A step per call cost four round
trips, and the counter's row is also locked by every commit that links events onto the workflow's chain, so each
step waited for the commits before it. A replica therefore takes a *block*: one
step advances the counter by ``size`` and the replica hands the block's sequences out itself.

The size adapts to the pace of the workflow's calls: it starts at 1, doubles (to ``BLOCK_MAX``) while blocks are
used up within ``BLOCK_SECONDS``, halves when a block's rest expires unused, and starts at 1 again after a pause.
What a block leaves unused is a gap, as a sequence whose reservation never committed already was: it holds
nothing, and nothing reads sequences as contiguous (a save's mark counts the rows below it, see ``digest``). A
block's rest expires after ``BLOCK_SECONDS``, so a replica's sequences lag the others' by at most that long: a
call may take a sequence below one another replica gave a call a moment earlier, as the order of two commits
across replicas never was the order of their sequences anyway. A replica that dies leaves its block's rest as a
gap; one that loses its connection forgets its blocks (a step the database lost in a crash may be taken again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

BLOCK_MAX = 256
"""The most sequences one step of the shared counter takes (the widest gap a replica can leave). A step waits for
the commit under way (it holds the same row) on the replica's event loop: at ~1,300 calls/s, blocks of 64 cost
~3% of the loop's time in such waits (py-spy), blocks of 256 a quarter of that."""
BLOCK_SECONDS = 0.5
"""How long a block's sequences may be handed out; the rest then expires (a gap)."""


@dataclass
class _Block:
    next: int
    last: int
    size: int
    taken: float


class SequenceBlocks:
    """Per-workflow blocks of sequences, refilled by ``take(workflow, size)``: one atomic step of the shared
    counter by ``size``, returning the block's last sequence (None: the workflow has no counter).

    Thread-safe: a refill runs under a lock, so two threads never take two blocks for one gap.
    """

    def __init__(self, take: Callable[[str, int], int | None], clock: Callable[[], float] = time.monotonic) -> None:
        self._take = take
        self._clock = clock
        self._blocks: dict[str, _Block] = {}
        self._lock = threading.RLock()  # a refill that reconnects forgets the blocks, under the same lock

    def next(self, workflow: str) -> int | None:
        """The next sequence of ``workflow`` no other replica was or will be given; None without a counter.

        Raises:
            JournalError: as ``take`` (nothing is kept of a failed step).
        """
        with self._lock:
            now = self._clock()
            block = self._blocks.get(workflow)
            if block is not None and block.next <= block.last and now - block.taken < BLOCK_SECONDS:
                block.next += 1
                return block.next - 1
            size = _size_after(block, now)
            last = self._take(workflow, size)
            if last is None:
                self._blocks.pop(workflow, None)
                return None
            first = last - size + 1
            self._blocks[workflow] = _Block(first + 1, last, size, now)
            return first

    def forget(self) -> None:
        """Drop every block (after a lost connection: a step the database lost may be taken again by another)."""
        with self._lock:
            self._blocks.clear()


def _size_after(block: _Block | None, now: float) -> int:
    """The size of the next block, given the one before (None: the first)."""
    if block is None:
        return 1
    elapsed = now - block.taken
    if elapsed >= 2 * BLOCK_SECONDS:
        return 1  # a pause: start small again
    used_up = block.next > block.last
    if used_up and elapsed < BLOCK_SECONDS:
        return min(block.size * 2, BLOCK_MAX)  # calls come faster than the block lasts
    if not used_up:
        return max(1, block.size // 2)  # the rest expired unused
    return block.size
