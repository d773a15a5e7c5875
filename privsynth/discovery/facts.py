"""DP column facts: what a column's values ARE (type, integer-valued, identifier-like), decided under DP.

A source that declares no types (CSV is read as text, never sniffed) or declares a weaker type than
its values have (integer codes stored as floats) gets its column type from noisy counts, never from
an exact look at the rows (a single added row must not change a published type with certainty).

Per column, one aggregate query counts the rows in mutually exclusive CLASSES: missing, a whole
number, a fractional number, a date, a timestamp, other text. Each row falls in exactly one class, so
the class histogram has L2 sensitivity 1 under add/remove-one; with N(0, sigma^2) noise on each class,
sigma = 1/sqrt(2 rho_classes), it is rho_classes-zCDP. The column's number of distinct present values
moves by at most 1 when a row is added or removed: N(0, sigma^2) noise with sigma = 1/sqrt(2 rho_distinct)
is rho_distinct-zCDP. Everything decided from the two (``decide``) is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CLASSES = ("missing", "whole", "fraction", "date", "timestamp", "text")
NUMBER_SHARE = 0.95  # a text column whose present values are this share numbers is numeric
DATE_SHARE = 0.95
FRACTION_SHARE = 0.001  # an integer-valued column has at most this share of fractional values (beyond noise)
IDENTIFIER_DISTINCT_SHARE = 0.9  # distinct present values / present values: an identifier (one value per row)
IDENTIFIER_EVIDENCE = 10.0  # ... decided only when the present count is this many noise sigmas (the ratio within 10%)
EVIDENCE_SIGMAS = 5.0  # a column with fewer present values than this many noise sigmas shows nothing


@dataclass(frozen=True)
class NoisyFacts:
    """One column's DP facts: the noisy class counts (in CLASSES order), the noisy distinct count, their sigmas."""

    column: str
    classes: tuple[float, ...]
    distinct: float
    sigma_classes: float
    sigma_distinct: float

    def count(self, cls: str) -> float:
        return max(0.0, self.classes[CLASSES.index(cls)])

    @property
    def present(self) -> float:
        """A DP estimate of the present values: the unclipped sum (unbiased; clipping each class would not be)."""
        return max(0.0, float(sum(self.classes[1:])))

    def noise_of(self, classes: int) -> float:
        """Three standard deviations of the noise of a sum of ``classes`` noisy classes: a smaller sum is noise."""
        return 3.0 * self.sigma_classes * math.sqrt(classes)

    @property
    def rows(self) -> float:
        """A DP estimate of the row count (post-processing)."""
        return max(0.0, float(sum(self.classes)))


@dataclass(frozen=True)
class ColumnFacts:
    """What the DP facts decide for one column (post-processing). ``kind`` None: the column is dropped."""

    column: str
    kind: str | None
    reason: str
    unreadable_share: float  # present values that do not read as ``kind`` (become missing), a DP estimate
    missing_share: float


def gaussian_sigma(rho: float) -> float:
    """sigma of a Gaussian count release with L2 sensitivity 1 that is rho-zCDP."""
    return math.sqrt(1.0 / (2.0 * rho))


def class_expressions(raw, declared: str):
    """ibis boolean expressions, one per CLASSES entry (exactly one is true per row), for a column whose
    source kind is ``declared`` (text, integer, float, boolean, date, timestamp)."""
    import ibis

    from privsynth.engine.values import clean_text, in_calendar, is_whole, moment_from_text, number_from_text

    false = raw.isnull() & ibis.literal(False)  # a column (a literal alone would be a scalar)
    if declared == "text":
        text = clean_text(raw)
        missing = text.isnull()
        number = number_from_text(text)
        whole = ~missing & is_whole(number)
        fraction = ~missing & number.notnull() & ~whole
        moment = moment_from_text(text)
        temporal = ~missing & number.isnull() & moment.notnull()
        date = temporal & (text.length() <= 10)
        stamp = temporal & (text.length() > 10)
        other = ~missing & number.isnull() & moment.isnull()
        return (missing, whole, fraction, date, stamp, other)
    if declared in ("integer", "float"):
        value = raw.cast("float64")
        missing = raw.isnull() | value.isnan().fill_null(True)
        whole = ~missing & is_whole(value)
        return (missing, whole, ~missing & ~whole, false, false, false)
    missing = (in_calendar(raw) if declared in ("date", "timestamp") else raw).isnull()
    present = ~missing
    return (missing, false, false, present if declared == "date" else false,
            present if declared == "timestamp" else false, present if declared == "boolean" else false)


def exact_counts(table, columns: list[tuple[str, str]]) -> dict[str, tuple[np.ndarray, float]]:
    """Per column (name, declared source kind): exact class counts and distinct present values, by ONE
    aggregate query where the data lives. Private: they leave only through ``release``."""
    import ibis

    from privsynth.engine.backends import backend_error
    from privsynth.engine.values import clean_text

    aggregates = {}
    for j, (name, declared) in enumerate(columns):
        raw = table[name]
        for k, expr in enumerate(class_expressions(raw, declared)):
            aggregates[f"c{j}_{k}"] = ibis.ifelse(expr, 1, 0).sum()  # a CASE: PostgreSQL casts no boolean to BIGINT
        present = clean_text(raw) if declared == "text" else raw
        aggregates[f"c{j}_d"] = present.nunique()
    if not aggregates:
        return {}
    try:
        row = table.aggregate(**aggregates).to_pyarrow().to_pylist()[0]
    except Exception as err:  # noqa: BLE001  (the backend's message may quote a value: a value-free one instead)
        raise backend_error(err, "the column facts query") from None
    out = {}
    for j, (name, _) in enumerate(columns):
        counts = np.asarray([float(row[f"c{j}_{k}"] or 0) for k in range(len(CLASSES))])
        out[name] = (counts, float(row[f"c{j}_d"] or 0))
    return out


def release(name: str, counts: np.ndarray, distinct: float, rho: float, noise) -> NoisyFacts:
    """The column's facts at ``rho`` in all (half on the class histogram, half on the distinct count): rho-zCDP."""
    sigma = gaussian_sigma(rho / 2.0)
    noisy = np.asarray(noise.add_gaussian(np.asarray(counts, dtype=np.float64), sigma))
    noisy_distinct = float(np.asarray(noise.add_gaussian(np.asarray([distinct], dtype=np.float64), sigma))[0])
    return NoisyFacts(name, tuple(float(x) for x in noisy), noisy_distinct, sigma, sigma)


def decide(facts: NoisyFacts, declared: str) -> ColumnFacts:
    """The column's type from its noisy facts (post-processing): categorical, integer, float, date,
    timestamp or boolean (declared only); None with a reason when it is an identifier. Inconclusive facts
    keep the declared type."""
    present, sigma = facts.present, facts.sigma_classes
    rows = max(facts.rows, 1.0)
    missing_share = min(1.0, facts.count("missing") / rows)
    if present < EVIDENCE_SIGMAS * sigma * math.sqrt(len(CLASSES)):
        # Inconclusive at this budget: the declared type stands (text: categorical, which holds any value);
        # the next round drops the column only if its own histogram shows nothing either.
        kind = "categorical" if declared == "text" else declared
        return ColumnFacts(facts.column, kind, f"its DP class counts are too noisy to decide more at this budget: "
                           f"kept as {kind}", 0.0, missing_share)
    if declared in ("boolean", "date", "timestamp"):
        return ColumnFacts(facts.column, declared, f"declared {declared}", 0.0, missing_share)
    numbers = facts.count("whole") + facts.count("fraction")
    temporal = facts.count("date") + facts.count("timestamp")
    # A share test alone is noise-fragile near its bar: the other classes' noisy total within three noise
    # deviations of zero is evidence enough (as for fractions below).
    not_numbers = facts.classes[3] + facts.classes[4] + facts.classes[5]
    not_temporal = facts.classes[1] + facts.classes[2] + facts.classes[5]
    numeric = numbers >= NUMBER_SHARE * present or not_numbers <= facts.noise_of(3)
    if declared == "text" and not numeric:
        if temporal >= DATE_SHARE * present or not_temporal <= facts.noise_of(3):
            kind = "timestamp" if facts.count("timestamp") > facts.count("date") else "date"
            other = facts.classes[1] + facts.classes[2] + facts.classes[5]
            return ColumnFacts(facts.column, kind, f"DP: {_pct(temporal / present)} of its values read as "
                               f"{kind}s", _share(other, facts.noise_of(3), present), missing_share)
        return _categorical_or_identifier(facts, present, "DP: its values are text")
    fraction = facts.count("fraction")
    integer = fraction <= max(FRACTION_SHARE * present, 3.0 * sigma)
    other = facts.classes[3] + facts.classes[4] + facts.classes[5]
    unreadable = _share(other, facts.noise_of(3), present) if declared == "text" else 0.0
    if integer:
        if facts.distinct >= IDENTIFIER_DISTINCT_SHARE * present and present > IDENTIFIER_EVIDENCE * facts.sigma_distinct:
            return ColumnFacts(facts.column, None, "DP: a whole number that is nearly unique per row (noisy distinct "
                               f"count {_pct(facts.distinct / present)} of the noisy present count): an identifier, "
                               "dropped", unreadable, missing_share)
        return ColumnFacts(facts.column, "integer", "DP: its numbers are whole (noisy count of fractional values "
                           "within the noise)", unreadable, missing_share)
    return ColumnFacts(facts.column, "float", f"DP: {_pct(fraction / present)} of its numbers have a fraction",
                       unreadable, missing_share)


def _categorical_or_identifier(facts: NoisyFacts, present: float, reason: str) -> ColumnFacts:
    rows = max(facts.rows, 1.0)
    missing_share = min(1.0, facts.count("missing") / rows)
    if facts.distinct >= IDENTIFIER_DISTINCT_SHARE * present and present > IDENTIFIER_EVIDENCE * facts.sigma_distinct:
        return ColumnFacts(facts.column, None, "DP: text nearly unique per row (noisy distinct count "
                           f"{_pct(facts.distinct / present)} of the noisy present count): an identifier or free "
                           "text, dropped", 0.0, missing_share)
    return ColumnFacts(facts.column, "categorical", reason, 0.0, missing_share)


def _share(count: float, noise: float, present: float) -> float:
    """``count / present`` where ``count`` stands out of its noise, else 0 (post-processing)."""
    return min(1.0, count / present) if count > noise and present > 0 else 0.0


def _pct(share: float) -> str:
    return f"{100.0 * max(0.0, min(1.0, share)):.1f}%"
