"""A column's written form decided from its DP facts (post-processing of ``facts.NoisyFacts``): how its numbers
are written (thousands, currency, percent; decimals), its dates and moments (ISO, slashed, dotted, year-first),
and the grain its moments are whole in. ``facts.decide`` reads them beside the column's type."""

from __future__ import annotations

import math
from typing import Protocol

from privsynth.schema.temporal import GRAINS

NUMBER_FORMAT_CLASSES = ("thousands", "currency", "percent")


class NoisyFacts(Protocol):
    """What a written form is read from: a column's noisy class counts and decimals histogram (``facts.NoisyFacts``)."""

    decimals: tuple[float, ...]
    sigma_decimals: float

    def count(self, cls: str) -> float: ...

    def total(self, classes) -> float: ...

    def noise_of(self, classes: int) -> float: ...


def number_format(facts: NoisyFacts) -> str | None:
    """The written form of a column's numbers: the format class with the largest noisy count, when that count
    stands out of its noise (a column of "950.00" and "6,689.41" is written with thousands separators)."""
    counts = {f: facts.count(f) for f in NUMBER_FORMAT_CLASSES}
    best = max(counts, key=counts.get)
    return best if counts[best] > facts.noise_of(1) else None


def date_format(facts: NoisyFacts) -> str | None:
    """The written form of a column's dates or moments (None: ISO), the form with the largest noisy count: dotted,
    year-first with slashes (dates, or moments), or slashed month-first or day-first (by the dates only one of them
    reads; an ambiguous column is month-first)."""
    totals = {None: facts.total(("date", "timestamp")),
              "%d.%m.%Y": facts.total(("dot",)),
              "%Y/%m/%d": facts.total(("year_first",)),
              "%Y/%m/%d %H:%M:%S": facts.total(("year_first_time",)),
              "slash": facts.total(("month_first", "day_first", "slash"))}
    best = max(totals, key=lambda form: totals[form])
    if best == "slash":
        return "%d/%m/%Y" if facts.count("day_first") > facts.count("month_first") else "%m/%d/%Y"
    return best


def temporal_kind(facts: NoisyFacts, written: str | None) -> str:
    """A date or a timestamp column, by its written form (one with a time of day is a timestamp) or, for ISO
    text, by which of the two has the larger noisy count."""
    if written is not None:
        return "timestamp" if "%H" in written else "date"
    return "timestamp" if facts.count("timestamp") > facts.count("date") else "date"


def written_precision(facts: NoisyFacts) -> int | None:
    """The decimals a float column is written with: the fewest k (at least 1) such that the noisy count of numbers
    written with more than k decimals is within its noise; None when they are written with more than 4, or when
    the histogram shows no numbers at all. The count at k itself need not stand out: humidity written 78 or 66.5
    (22% halves) has nothing beyond one decimal, and its halves' count under noise 346 sometimes fell short of
    three deviations, which gave it 15 decimals."""
    bins = [float(x) for x in facts.decimals]
    noise = 3.0 * facts.sigma_decimals
    if sum(bins) <= noise * math.sqrt(len(bins)):
        return None
    for k in range(1, len(bins) - 1):
        beyond = bins[k + 1:]
        if sum(beyond) <= noise * math.sqrt(len(beyond)):
            return k
    return None


def moment_resolution(facts: NoisyFacts) -> str | None:
    """The grain a timestamp column's moments are whole in (engine.values.GRAINS): the coarsest g such that the
    noisy count of moments finer than g is within its noise (three deviations) and the moments whole in g stand
    out of theirs; None (whole seconds) when no coarser grain holds them. Hourly readings come back on the hour,
    not at 02:30:09."""
    bins = [float(x) for x in facts.decimals[:len(GRAINS)]]
    noise = 3.0 * facts.sigma_decimals
    for k, grain in enumerate(GRAINS[:-1]):
        finer, whole = bins[k + 1:], bins[:k + 1]
        if sum(finer) <= noise * math.sqrt(len(finer)) and sum(whole) > noise * math.sqrt(len(whole)):
            return grain
    return None


def in_grain(resolution: str | None) -> str:
    return f", whole {resolution}s" if resolution else ""
