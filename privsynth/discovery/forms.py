"""A column's written form decided from its DP facts (post-processing of ``facts.NoisyFacts``): how its numbers
are written (thousands, currency, percent; decimals), its dates and moments (ISO, slashed, dotted, year-first),
and the grain its moments are whole in. ``facts.decide`` reads them beside the column's type."""

from __future__ import annotations

import math
from typing import Protocol

from scipy.stats import norm

from privsynth.schema.temporal import GRAINS

NUMBER_FORMAT_CLASSES = ("thousands", "currency", "percent")
PLAIN_NUMBER_CLASSES = ("whole", "fraction")  # the facts' classes of a number written plainly (a stored one's only)
NUMBER_CLASSES = (*PLAIN_NUMBER_CLASSES, *NUMBER_FORMAT_CLASSES)  # the facts' classes of a present number
# the facts' classes of an ISO moment written other than with a T and no offset, and the form each is written in
ISO_FORMS = {"iso_space": "%Y-%m-%d %H:%M:%S", "iso_offset": "%Y-%m-%dT%H:%M:%S+00:00",
             "iso_space_offset": "%Y-%m-%d %H:%M:%S+00:00"}
ISO_FORM_CLASSES = tuple(ISO_FORMS)
TENS = 3  # the places histogram's first slots: whole multiples of 1000, 100 and 10 (coarsest first)
ZERO = TENS + 6  # its last slot: zeros, a multiple of every power (no step either way, whole for decimals)
ZULU = 4  # a moment's slot is its grain's (0 .. 3), or ZULU more for an ISO moment written with a Z: one a row
PLACES = ZERO + 1  # its slots: slot i < ZERO holds the numbers whole in 10^(TENS - i) and in no coarser power of
# ten: multiples of 1000, 100, 10, then other whole numbers, then numbers written with 1, 2, 3, 4, and 5+ decimals


class NoisyFacts(Protocol):
    """What a written form is read from: a column's noisy class counts and decimals histogram (``facts.NoisyFacts``)."""

    decimals: tuple[float, ...]
    sigma_decimals: float

    def count(self, cls: str) -> float: ...

    def total(self, classes) -> float: ...

    def noise_of(self, classes: int, deviations: float = 3.0) -> float: ...


# A finer slot of the places histogram stands out at this many deviations, any of several at the false-alarm rate of
# one: at three a slot at a time, one float column in 170 got a decimal more, every value then in a form the column
# never holds; at four, cents held by 1,500 of 7,200 rows at a 60-column table's noise were kept in 41% of draws
# (82% before; 60% here).
SLOT_SIGMAS = 3.5


def family_sigmas(deviations: float, tests: int) -> float:
    """The deviations each of ``tests`` noisy counts must pass for any of them to pass by noise alone at the rate
    one count passes ``deviations`` (Bonferroni; public arithmetic)."""
    return float(norm.isf(norm.sf(deviations) / max(tests, 1)))


# Any of the three format classes standing out at the false-alarm rate of one class at four deviations: at three,
# noise alone gave one plain number column in 250 a "$", a "%" or separators, and every value came back so written.
FORMAT_SIGMAS = family_sigmas(4.0, len(NUMBER_FORMAT_CLASSES))


def number_format(facts: NoisyFacts) -> str | None:
    """The written form of a column's numbers: the format class with the largest noisy count, when that count
    stands FORMAT_SIGMAS deviations out of its noise (a column of "950.00" and "6,689.41" is written with
    thousands separators)."""
    counts = {f: facts.count(f) for f in NUMBER_FORMAT_CLASSES}
    best = max(counts, key=counts.get)
    return best if counts[best] > facts.noise_of(1, FORMAT_SIGMAS) else None


def date_format(facts: NoisyFacts) -> str | None:
    """The written form of a column's dates or moments (None: ISO), the form with the largest noisy count: dotted,
    year-first with slashes (dates, or moments), or slashed month-first or day-first (by the dates only one of them
    reads; an ambiguous column is month-first), moments where most of them carry a time of day
    (``slashed_moments``: "9/30/1990 0:00:00", as spreadsheets and SQL Server export them); ISO moments written with
    a space or a zone offset (``ISO_FORMS``)."""
    totals = {None: facts.total(("date", "timestamp")),
              **{form: facts.total((cls,)) for cls, form in ISO_FORMS.items()},
              "%d.%m.%Y": facts.total(("dot",)),
              "%Y/%m/%d": facts.total(("year_first",)),
              "%Y/%m/%d %H:%M:%S": facts.total(("year_first_time",)),
              "slash": facts.total(("month_first", "day_first", "slash"))}
    best = max(totals, key=lambda form: totals[form])
    if best is None and zulu_moments(facts):
        return "%Y-%m-%dT%H:%M:%SZ"
    if best == "slash":
        first = "%d/%m/%Y" if facts.count("day_first") > facts.count("month_first") else "%m/%d/%Y"
        return first + " %H:%M:%S" if slashed_moments(facts) > 0.5 * totals["slash"] else first
    return best


def moment_slots(facts: NoisyFacts) -> tuple[list[float], list[float]]:
    """The grain slots of a column's moments written without a Z, and of those written with one (``ZULU`` after)."""
    slots = [float(x) for x in facts.decimals]
    return slots[:len(GRAINS)], slots[ZULU:ZULU + len(GRAINS)]


def zulu_moments(facts: NoisyFacts) -> bool:
    """Whether most of a column's ISO moments are written with a Z ("2012-01-01T06:16:41Z", UTC as JSON and APIs
    write it), beyond the noise of the grain slots either way (post-processing): they are written back with it."""
    plain, marked = moment_slots(facts)
    return sum(marked) - sum(plain) > 2.0 * facts.sigma_decimals * math.sqrt(2.0 * len(GRAINS))


def slashed_moments(facts: NoisyFacts) -> float:
    """A DP estimate of a column's slashed values that carry a time of day (post-processing): its decimals histogram
    counts each number's place and each moment's grain, so what it holds beyond its numbers and its other moments
    (ISO dates and moments, year-first moments) is its slashed moments."""
    others = facts.total(NUMBER_CLASSES) + facts.total(("date", "timestamp", "year_first_time", *ISO_FORM_CLASSES))
    return float(sum(facts.decimals)) - others


def temporal_kind(facts: NoisyFacts, written: str | None) -> str:
    """A date or a timestamp column, by its written form (one with a time of day is a timestamp) or, for ISO
    text, by which of the two has the larger noisy count."""
    if written is not None:
        return "timestamp" if "%H" in written else "date"
    return "timestamp" if facts.count("timestamp") > facts.count("date") else "date"


def written_precision(facts: NoisyFacts) -> int | None:
    """The decimals a float column is written with: the fewest k (at least 1) such that the noisy count of numbers
    written with more than k decimals, and each of its slots, are within their noise; None when no k up to 4 holds
    (numbers written with 5 or more decimals) or when no number shows (``shows_numbers``). The count at k itself
    need not stand out: humidity written 78 or 66.5 (22% halves) has nothing beyond one decimal, and its halves' count
    under noise 346 sometimes fell short of three deviations, which gave it 15 decimals. A finer k needs the
    evidence (fewer decimals never write a number outside the column's form): the finer slots stand out at
    SLOT_SIGMAS deviations, any of them at the false-alarm rate of one."""
    slots = [float(x) for x in facts.decimals]
    bins = slots[:ZERO]  # a zero is written with no decimals
    for k in range(1, len(bins) - TENS - 1):
        beyond = bins[TENS + k + 1:]
        # each slot alone too: 2,315 of 4,654 pollution shares written with 2 decimals (0.25, 0.75) were within
        # the noise of four slots' sum (410 a slot), and came back as 0.2 and 0.8
        bar = family_sigmas(SLOT_SIGMAS, len(beyond)) * facts.sigma_decimals
        if within_noise(beyond, facts.sigma_decimals, SLOT_SIGMAS) and max(beyond) <= bar:
            return k if shows_numbers(facts, [*bins[:TENS + k + 1], slots[ZERO]]) else None
    return None


def shows_numbers(facts: NoisyFacts, kept: list[float]) -> bool:
    """Whether a column's facts show numbers: the noisy count of its plain or of all its number classes, or the sum of
    its places histogram's slots, or of those a precision keeps, stands two deviations out of its noise (three
    missed 5,698 pressures at a 50-column table's noise, 345 a slot, one run in 170, and each such column came back
    with 15 decimals). Any of them will do: the ten slots' sum alone carried the noise of the empty finer slots, and
    2,784 fielding percentages at a 41-column table's noise (314 a slot) showed no numbers in 21% of draws."""
    slots = [float(x) for x in facts.decimals]
    return (any(facts.total(classes) > facts.noise_of(len(classes), 2.0)
                for classes in (PLAIN_NUMBER_CLASSES, NUMBER_CLASSES))
            or any(not within_noise(part, facts.sigma_decimals, 2.0) for part in (slots, kept)))


def within_noise(counts, sigma: float, deviations: float = 3.0) -> bool:
    """Whether the sum of some noisy counts (noise ``sigma`` each) is within ``deviations`` deviations of its noise."""
    return float(sum(counts)) <= deviations * sigma * math.sqrt(len(counts))


def written_step(facts: NoisyFacts) -> int | None:
    """The place an integer column's numbers are whole in, as a negative precision: -1 when every value is a whole
    ten (wind directions 0, 10, ..., 360), -2 hundreds, -3 thousands; None for units. The coarsest place whose
    finer slots hold, beyond doubt, at most a twentieth of the numbers and whose own and coarser slots stand out of
    their noise (``coarsest_slot``): wind directions drawn as 231 or 247 inside their bins were values the column
    never holds."""
    k = coarsest_slot([float(x) for x in facts.decimals[:ZERO]], facts.sigma_decimals, TENS)
    return None if k is None else k - TENS


def moment_resolution(facts: NoisyFacts) -> str | None:
    """The grain a timestamp column's moments are whole in (engine.values.GRAINS): the coarsest g such that the
    moments finer than g are not shown, beyond one deviation of their noise, to pass a twentieth, and the moments
    whole in g stand out of their noise (``coarsest_slot`` with the margin taken off); None (whole seconds) when
    no coarser grain holds them. Hourly readings come back on the hour, not at 02:30:09. The burden of proof is
    on the finer grain: a coarser one never writes a moment outside the column's form (a midnight is a whole hour
    and minute too), while a finer one drew times of day into dates stored as timestamps in half the draws at a
    wide table's noise."""
    # the grains of the moments written with a Z, or of the others: whichever holds more (summing both halves
    # doubled the noise's variance, and midnights at 8,000 rows got a finer grain three times as often)
    plain, marked = moment_slots(facts)
    grains = marked if sum(marked) > sum(plain) else plain
    k = coarsest_slot(grains, facts.sigma_decimals, len(GRAINS) - 1, finer_margin=-1.0)
    return None if k is None else GRAINS[k]


FINER_SHARE = 0.05  # a grain or a step holds when what is finer than it is at most this share of the values


def coarsest_slot(slots: list[float], sigma: float, candidates: int, finer_margin: float = 1.0) -> int | None:
    """The first slot k < ``candidates`` of a histogram ordered coarsest first (noise ``sigma`` a slot) such that
    the noisy count of the slots after it (finer), ``finer_margin`` deviations of its noise added, is at most
    FINER_SHARE of the whole histogram's, and that of k and the slots before it stands three deviations out of its
    noise (post-processing). With a positive margin the coarser step needs the evidence: an integer's step snaps
    every finer value onto it, so a share hidden in the noise is no evidence (at a 74-column table's noise, 800 a
    slot, the 2,780 house years that are no whole thousand were within three deviations of nothing, and a few
    noisy thousands made every year 2000; where the noise hides the finer values, the column keeps its units).
    A negative margin puts the burden on the finer step (a moment's grain, ``moment_resolution``)."""
    total = max(sum(slots), 0.0)
    for k in range(candidates):
        finer, whole = slots[k + 1:], slots[:k + 1]
        if (sum(finer) + finer_margin * sigma * math.sqrt(len(finer)) <= FINER_SHARE * total
                and sum(whole) > 3.0 * sigma * math.sqrt(len(whole))):
            return k
    return None


def in_places(precision: int | None) -> str:
    """A decided precision in words: decimals for a float, whole tens to thousands for an integer."""
    if precision is None:
        return ""
    if precision == 0:
        return ", written whole"
    if precision > 0:
        return f", written with {precision} decimals"
    return f", whole {10 ** -precision:,}s"


def in_grain(resolution: str | None) -> str:
    return f", whole {resolution}s" if resolution else ""


PLACE_SHARE_SIGMAS = 2.0  # a place whose noisy count stands this many deviations out of its noise keeps its share


def place_shares(facts: NoisyFacts, precision: int | None) -> tuple[float, ...] | None:
    """The share of a number column's values whole in each place, coarsest first (multiples of 1000, 100, 10, whole,
    then 1 .. precision decimals; ``schema.grid``), from its places histogram (post-processing). A place whose
    noisy count does not stand PLACE_SHARE_SIGMAS deviations out of its noise takes the share the uniform grid gives
    it (its density times the column's noisy count), so a column whose places the noise hides is drawn uniformly,
    as before. Zeros count with the multiples of 1000. None where no place stands out."""
    from privsynth.schema.grid import place_density

    p = precision or 0
    if p < -TENS:
        return None
    slots = [float(x) for x in facts.decimals]
    counts = [slots[0] + slots[ZERO], *slots[1:TENS + 1 + p]]
    noise = [facts.sigma_decimals * math.sqrt(2.0), *[facts.sigma_decimals] * (len(counts) - 1)]
    standing = [c > PLACE_SHARE_SIGMAS * s for c, s in zip(counts, noise)]
    if not any(standing):
        return None
    total = max(sum(max(c, 0.0) for c in counts), 1.0)
    density = place_density(p)
    shares = [c if stands else float(d) * total for c, stands, d in zip(counts, standing, density)]
    whole = sum(shares)
    return tuple(float(f"{x / whole:.4g}") for x in shares)
