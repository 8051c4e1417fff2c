"""Summaries of timing samples, and the interleaving schedule every benchmark uses."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (0..1) of already sorted values, linearly interpolated."""
    if not sorted_values:
        return math.nan
    position = fraction * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class Summary:
    """Samples in microseconds (or any unit; the summary keeps what it was given)."""

    count: int
    median: float
    p99: float
    p90: float
    mean: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, samples: Iterable[float]) -> Summary:
        """Summarise ``samples``."""
        values = sorted(samples)
        if not values:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(
            count=len(values),
            median=percentile(values, 0.5),
            p99=percentile(values, 0.99),
            p90=percentile(values, 0.9),
            mean=sum(values) / len(values),
            minimum=values[0],
            maximum=values[-1],
        )


def micros(samples_ns: Iterable[int]) -> list[float]:
    """Nanoseconds to microseconds."""
    return [value / 1000.0 for value in samples_ns]


def interleaved(items: Sequence[T], rounds: int, seed: int = 6) -> list[tuple[int, T]]:
    """``rounds`` passes over ``items``, each in a fresh random order: (round, item) in schedule order.

    Every contender is measured in every round, next to the others, so a noisy moment of a shared machine hits
    them all alike instead of one of them.
    """
    rng = random.Random(seed)
    schedule: list[tuple[int, T]] = []
    for round_no in range(rounds):
        order = list(items)
        rng.shuffle(order)
        schedule.extend((round_no, item) for item in order)
    return schedule


def paired_difference(blocks: Sequence[Sequence[float]], base: Sequence[Sequence[float]]) -> float:
    """Median over rounds of (this round's block median minus the base's block median in the same round).

    A cross-check of the plain difference of medians that is robust to slow drifts of a shared machine: each
    round's two blocks ran seconds apart, so they saw about the same background load.
    """
    differences = sorted(
        percentile(sorted(mine), 0.5) - percentile(sorted(theirs), 0.5)
        for mine, theirs in zip(blocks, base, strict=True)
        if mine and theirs
    )
    return percentile(differences, 0.5)


def fmt(value: float, digits: int = 0) -> str:
    """A number for a table (thousands separated)."""
    if math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"
