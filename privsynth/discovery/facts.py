"""DP column facts: what a column's values ARE (type, integer-valued, identifier-like), decided under DP.

A source that declares no types (CSV is read as text, never sniffed) or declares a weaker type than
its values have (integer codes stored as floats) gets its column type from noisy counts, never from
an exact look at the rows (a single added row must not change a published type with certainty).

Per column, one aggregate query counts the rows in mutually exclusive CLASSES: missing, a whole
number, a fractional number, a date, a timestamp, other text, and the written forms of
``engine/values.py`` (numbers with thousands separators, a dollar sign or a percent sign; dates written
month-first, day-first, either (both parts at most 12) or with dots). Each row falls in exactly one class, so
the class histogram has L2 sensitivity 1 under add/remove-one; with N(0, sigma^2) noise on each class,
sigma = 1/sqrt(2 rho_classes), it is rho_classes-zCDP. The column's number of distinct present values
moves by at most 1 when a row is added or removed: N(0, sigma^2) noise with sigma = 1/sqrt(2 rho_distinct)
is rho_distinct-zCDP. So does each slot of the PLACES histogram (the numbers by the decimal place they are whole
in: thousands, hundreds, tens, units, then how many decimals they are written with, as text or, for a stored
number, its shortest decimal form; a timestamp's moments by their grain; each row in at most one slot):
rho_decimals-zCDP. rho is split in three equal parts; everything
decided from them (``decide``: type, format, precision) is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsynth.discovery.forms import (
    NUMBER_CLASSES,
    PLACES,
    PLAIN_NUMBER_CLASSES,
    TENS,
    ZERO,
    date_format,
    family_sigmas,
    in_grain,
    in_places,
    moment_resolution,
    number_format,
    temporal_kind,
    within_noise,
    written_precision,
    written_step,
)
from privsynth.discovery.row_reads import (
    CLASSES,
    DATE_FORMAT_CLASSES,
    decimals_bin,
    read_text,
    row_class,
    slashed_moment_parts,
    text_grain,
)
from privsynth.privacy.accounting import gaussian_sigma

CLASS_SHARE = 0.4  # of a column's facts' rho, on the class histogram and on the distinct count each; the rest: decimals
NUMBER_SHARE = 0.95  # a text column whose present values are this share numbers is numeric
DATE_SHARE = 0.95
FRACTION_SHARE = 0.001  # an integer-valued column has at most this share of fractional values (beyond noise)
IDENTIFIER_DISTINCT_SHARE = 0.9  # distinct present values / present values: an identifier (one value per row)
FEW_DISTINCT_SHARE = 0.5  # a column named like a key or free text is kept when its values repeat this much (DP)
IDENTIFIER_EVIDENCE = 10.0  # ... decided only when the present count is this many noise sigmas (the ratio within 10%)
STANDING_SIGMAS = 4.0  # a class whose noisy count is above this many sigmas counts towards the present values
EVIDENCE_SIGMAS = 5.0  # a column with fewer present values than this many noise sigmas shows nothing
KIND_SIGMAS = 3.0  # inconclusive facts: text becomes numbers or dates only where their group stands this far out


@dataclass(frozen=True)
class NoisyFacts:
    """One column's DP facts: the noisy class counts (in CLASSES order), the noisy distinct count, their sigmas."""

    column: str
    classes: tuple[float, ...]
    distinct: float
    sigma_classes: float
    sigma_distinct: float
    # noisy counts of numbers by the decimal place they are whole in (PLACES slots, coarsest first); of a timestamp
    # column's moments, by grain (engine.values.GRAINS: the first four slots)
    decimals: tuple[float, ...] = ()
    sigma_decimals: float = 1.0

    def count(self, cls: str) -> float:
        i = CLASSES.index(cls)
        return max(0.0, self.classes[i]) if i < len(self.classes) else 0.0

    def total(self, classes) -> float:
        """The unclipped sum of some classes' noisy counts (unbiased)."""
        return float(sum(self.classes[CLASSES.index(c)] for c in classes if CLASSES.index(c) < len(self.classes)))

    @property
    def present(self) -> float:
        """A DP estimate of the present values: the unclipped sum (unbiased; clipping each class would not be)."""
        return max(0.0, float(sum(self.classes[1:])))

    @property
    def present_standing(self) -> float:
        """The present values of the classes that stand out of their noise (four deviations): the estimate to
        compare a distinct count with. The unbiased ``present`` carries the noise of every class (fourteen), so
        a nearly-unique column's distinct/present ratio would pass or fail its bar by chance; most classes of
        a column are empty, and leaving out those within their noise costs at most four deviations each."""
        return float(sum(self.standing_classes()))

    @property
    def present_standing_sd(self) -> float:
        """The noise deviation of ``present_standing``: a sum of a few classes' noise, not fourteen."""
        return self.sigma_classes * math.sqrt(max(1, len(self.standing_classes())))

    def present_for_values(self) -> tuple[float, float]:
        """A DP estimate of the present values to weigh a column's found values against, and its deviation
        (post-processing): ``present_standing``, or, where no class stands out of its noise (a column of few
        present values: 1,155 masonry types of 2,930 houses under noise 298 a class), the likeliest present
        class's noisy count. Without it such a column showed no present value, so no value unfound, and its
        only category lost at the first look stayed lost."""
        if self.standing_classes():
            return self.present_standing, self.present_standing_sd
        return max(0.0, max(self.classes[1:], default=0.0)), self.sigma_classes

    def numbers_present(self, declared: str) -> tuple[float, float]:
        """A DP estimate of the column's present numbers (unbiased: the unclipped sum of the number classes; a stored
        number's are whole and fraction only, a stored integer's whole only) and its noise deviation
        (post-processing)."""
        classes = ("whole",) if declared == "integer" else PLAIN_NUMBER_CLASSES if declared in TYPED_NUMBERS \
            else NUMBER_CLASSES
        held = [c for c in classes if CLASSES.index(c) < len(self.classes)]
        return self.total(held), self.sigma_classes * math.sqrt(max(1, len(held)))

    def numbers_present_pooled(self, declared: str, others: list[NoisyFacts]) -> tuple[float, float]:
        """``numbers_present``, sharpened for a stored number by a second, independent estimate: the table's row
        count as the ``others`` columns' facts measured it (every row falls in one class of every column, so each
        column's class sum estimates the same n), less this column's missing count; the two weighed by their
        inverse variances (post-processing). At a 74-column table the deviation falls from sqrt(2) to about 0.87
        class deviations; a text column's other classes hold rows, so it keeps ``numbers_present``."""
        own, own_sd = self.numbers_present(declared)
        peers = [f for f in others if f is not self and len(f.classes) == len(self.classes)
                 and math.isclose(f.sigma_classes, self.sigma_classes)]
        if declared not in TYPED_NUMBERS or not peers:
            return own, own_sd
        rows = float(np.mean([sum(f.classes) for f in peers]))
        by_rows = rows - self.classes[CLASSES.index("missing")]
        by_rows_var = self.sigma_classes ** 2 * (1.0 + len(self.classes) / len(peers))
        weights = (1.0 / own_sd ** 2, 1.0 / by_rows_var)
        return (own * weights[0] + by_rows * weights[1]) / sum(weights), 1.0 / math.sqrt(sum(weights))

    def standing_classes(self) -> list[float]:
        """The noisy counts of the present classes that stand STANDING_SIGMAS out of their noise."""
        return [x for x in self.classes[1:] if x > STANDING_SIGMAS * self.sigma_classes]

    def noise_of(self, classes: int, deviations: float = 3.0) -> float:
        """``deviations`` standard deviations of the noise of a sum of ``classes`` noisy classes: a smaller sum is
        noise."""
        return deviations * self.sigma_classes * math.sqrt(classes)

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
    value_format: str | None = None  # a written form of engine/values.py (thousands, %m/%d/%Y, ...); None: plain
    precision: int | None = None  # float columns: the decimals its values are written with; integer columns: a
    # negative place (-1: whole tens, -2: hundreds, -3: thousands)
    resolution: str | None = None  # timestamp columns: the grain its moments are whole in (day, hour, minute)


@dataclass(frozen=True)
class ExactFacts:
    """One column's exact counts (private: they leave only through ``release``)."""

    classes: np.ndarray
    distinct: float
    decimals: np.ndarray


def exact_counts(table, columns: list[tuple[str, str]]) -> dict[str, ExactFacts]:
    """Per column (name, declared source kind): exact class counts, distinct present values and the decimals
    histogram, by ONE aggregate query where the data lives. Private: they leave only through ``release``."""
    import ibis

    from privsynth.engine.backends import backend_error
    from privsynth.engine.values import clean_text, decimals_of, moment_grain, tens_of

    # Each row's class, decimals bin and cleaned value are computed once, in a projection; the aggregate
    # then only compares small integers (the tests of a value are written once, not once per class).
    if not columns:
        return {}
    cleaned = table.select(**{f"v{j}": clean_text(table[name]) if declared == "text" else table[name]
                              for j, (name, declared) in enumerate(columns)})
    texts = cleaned.select(*[cleaned[f"v{j}"] for j in range(len(columns))],
                           *[e.name(f"{key}{j}") for j, (_, declared) in enumerate(columns) if declared == "text"
                             for key, e in slashed_moment_parts(cleaned[f"v{j}"]).items()])
    reads, per_row = {}, {}
    for j, (_, declared) in enumerate(columns):
        if declared == "text":
            parts = {key: texts[f"{key}{j}"] for key in ("slashed", "dated")}
            reads[j] = {key: expr.name(f"{key}{j}") for key, expr in read_text(texts[f"v{j}"], parts).items()}
    read_table = texts.select(*[texts[f"v{j}"] for j in range(len(columns))],
                              *[e for j in reads for key, e in reads[j].items() if key != "text"])
    for j, (_, declared) in enumerate(columns):
        column = {key: read_table[f"v{j}"] if key == "text" else read_table[f"{key}{j}"] for key in reads.get(j, {})}
        per_row[f"k{j}"] = row_class(column, declared, read_table[f"v{j}"])
        per_row[f"v{j}"] = read_table[f"v{j}"]
        if declared == "text":  # a number's decimals, or a moment's grain (the rows of each read as one kind)
            per_row[f"p{j}"] = decimals_bin(column).coalesce(text_grain(column))
        elif declared == "float":  # a stored double: the place it is whole in (6.9, not 6.900000000000000355)
            per_row[f"p{j}"] = ibis.ifelse(read_table[f"v{j}"] == 0, ZERO,
                                           decimals_of(read_table[f"v{j}"], ZERO - 1 - TENS, fewest=-TENS) + TENS)
        elif declared == "integer":  # whole: thousands to units (its decimals' slots hold 0, a public fact)
            per_row[f"p{j}"] = ibis.ifelse(read_table[f"v{j}"] == 0, ZERO, tens_of(read_table[f"v{j}"], TENS) + TENS)
        elif declared == "timestamp":
            per_row[f"p{j}"] = moment_grain(read_table[f"v{j}"])
    rows = read_table.select(**per_row)
    aggregates = {}
    for j, (_name, declared) in enumerate(columns):
        for k in range(len(CLASSES)):
            # PostgreSQL casts no boolean to BIGINT
            aggregates[f"c{j}_{k}"] = ibis.ifelse(rows[f"k{j}"] == k, 1, 0).sum()
        aggregates[f"c{j}_d"] = rows[f"v{j}"].nunique()
        if declared in ("text", "integer", "float", "timestamp"):
            for k in (*range(TENS + 1), ZERO) if declared == "integer" else range(PLACES):
                aggregates[f"c{j}_p{k}"] = ibis.ifelse(rows[f"p{j}"] == k, 1, 0).sum()
    try:
        row = rows.aggregate(**aggregates).to_pyarrow().to_pylist()[0]
    except Exception as err:  # noqa: BLE001  (the backend's message may quote a value: a value-free one instead)
        raise backend_error(err, "the column facts query") from None
    out = {}
    for j, (name, _) in enumerate(columns):
        counts = np.asarray([float(row[f"c{j}_{k}"] or 0) for k in range(len(CLASSES))])
        decimals = np.asarray([float(row.get(f"c{j}_p{k}") or 0) for k in range(PLACES)])
        out[name] = ExactFacts(counts, float(row[f"c{j}_d"] or 0), decimals)
    return out


def release(name: str, exact: ExactFacts, rho: float, noise) -> NoisyFacts:
    """The column's facts at ``rho`` in all: CLASS_SHARE of it each on the class histogram and the distinct count,
    the rest on the decimals histogram (each of L2 sensitivity 1): rho-zCDP."""
    sigma = gaussian_sigma(rho * CLASS_SHARE)
    noisy = np.asarray(noise.add_gaussian(np.asarray(exact.classes, dtype=np.float64), sigma, sensitivity=1.0))
    noisy_distinct = float(np.asarray(noise.add_gaussian(np.asarray([exact.distinct], dtype=np.float64), sigma,
                                                          sensitivity=1.0))[0])
    sigma_decimals = gaussian_sigma(rho * (1.0 - 2.0 * CLASS_SHARE))
    noisy_decimals = np.asarray(noise.add_gaussian(np.asarray(exact.decimals, dtype=np.float64), sigma_decimals,
                                                    sensitivity=1.0))
    return NoisyFacts(name, tuple(float(x) for x in noisy), noisy_distinct, sigma, sigma,
                      tuple(float(x) for x in noisy_decimals), sigma_decimals)


TEMPORAL_CLASSES = ("date", "timestamp", *DATE_FORMAT_CLASSES)


def _stands_out(facts: NoisyFacts, classes: tuple[str, ...], rest: float) -> bool:
    """Whether a present class outside ``classes`` stands out of its noise, any of them at the false-alarm rate of
    one class at STANDING_SIGMAS, and holds more than ``rest`` values. One class at a time, the noise of one of a
    dozen made a column of 10,000 numbers text (all of it `<out-of-domain>`) in one draw of 4,000."""
    others = _others(classes)
    bar = family_sigmas(STANDING_SIGMAS, len(others)) * facts.sigma_classes
    return any(facts.count(c) > max(bar, rest) for c in others)


def _others(classes: tuple[str, ...]) -> tuple[str, ...]:
    """The present classes not in ``classes``."""
    return tuple(c for c in CLASSES[1:] if c not in classes)


TYPED_NUMBERS = ("integer", "float")


def undecided_present(sigma: float, declared: str) -> float:
    """The noisy present count below which a column's facts are inconclusive: EVIDENCE_SIGMAS deviations of the
    noise of the classes its values can fall in. A stored number is missing, whole or a fraction by construction
    (the source's type is public), so its present count sums two noisy classes, not fourteen: at a 60-column
    table's noise the fourteen kept 3,173 whole case counts stored as doubles undecided, and each came back as
    floats like 0.5017."""
    classes = len(PLAIN_NUMBER_CLASSES) if declared in TYPED_NUMBERS else len(CLASSES) - 1
    return EVIDENCE_SIGMAS * sigma * math.sqrt(classes)


def undecided_float_precision(facts: NoisyFacts) -> int | None:
    """The precision of a stored double whose class counts are inconclusive: whole (0) where neither its noisy
    fraction count nor its places histogram's decimals stand out of their noise, else ``written_precision``.
    Counts that a table stores as doubles because some are missing (case counts, 86% missing, about 1,000 present
    at noise 268 a class) came back as 0.3 or 0.99 with a precision of one decimal or none; where the noise hides
    a few fractions, their numbers are written whole, which is still a form the column holds (post-processing)."""
    decimals = facts.decimals[TENS + 1:ZERO]
    if facts.count("fraction") <= facts.noise_of(1) and within_noise(decimals, facts.sigma_decimals):
        return 0
    return written_precision(facts)


def decide(facts: NoisyFacts, declared: str) -> ColumnFacts:
    """The column's type, written form and precision from its noisy facts (post-processing): categorical,
    integer, float, date, timestamp or boolean (declared only); None with a reason when it is an identifier.
    Inconclusive facts keep the declared type."""
    present, sigma = facts.present, facts.sigma_classes
    if declared in TYPED_NUMBERS:
        present = max(0.0, facts.total(PLAIN_NUMBER_CLASSES))
    rows = max(facts.rows, 1.0)
    missing_share = min(1.0, facts.count("missing") / rows)
    if present < undecided_present(sigma, declared):
        # Inconclusive at this budget: the declared type stands; text takes the likeliest kind of its noisy
        # counts (a column of numbers never becomes a categorical whose every value is out of its domain).
        if declared != "text":
            # the written form has its own histogram: a float's decimals, an integer's tens, a moment's grain
            precision = undecided_float_precision(facts) if declared == "float" else \
                written_step(facts) if declared == "integer" else None
            resolution = moment_resolution(facts) if declared == "timestamp" else None
            return ColumnFacts(facts.column, declared, "its DP class counts are too noisy to decide more at this "
                               f"budget: kept as {declared}" + in_places(precision) + in_grain(resolution), 0.0,
                               missing_share, precision=precision, resolution=resolution)
        kind, written = likeliest_kind(facts)
        return ColumnFacts(facts.column, kind, "its DP class counts are too noisy to decide at this budget: kept as "
                           f"{kind}, the likeliest by them", 0.0, missing_share, value_format=written)
    if declared in ("boolean", "date", "timestamp"):
        resolution = moment_resolution(facts) if declared == "timestamp" else None
        return ColumnFacts(facts.column, declared, f"declared {declared}" + in_grain(resolution), 0.0, missing_share,
                           resolution=resolution)
    numbers = facts.total(NUMBER_CLASSES)
    temporal = facts.total(TEMPORAL_CLASSES)
    # A share test alone is noise-fragile near its bar: the other classes' noisy total within STANDING_SIGMAS noise
    # deviations of zero, as a single class is, is evidence enough (at three, a column of 15,402 ISO dates, noise
    # 183 a class, read as text in about one draw of 550, every value then wrong).
    not_numbers, not_temporal = facts.total(_others(NUMBER_CLASSES)), facts.total(_others(TEMPORAL_CLASSES))
    # Neither holds where one other class stands out of its own noise with more than the share's rest: 10% of sleep
    # hours written "<5" or "10+" summed to less than the noise of a dozen classes, or passed the share on the
    # noise of the other classes, and the column lost both labels to missing values.
    others_of_numbers, others_of_moments = len(_others(NUMBER_CLASSES)), len(_others(TEMPORAL_CLASSES))
    numeric = (numbers >= NUMBER_SHARE * present or not_numbers <= facts.noise_of(others_of_numbers, STANDING_SIGMAS)) \
        and not _stands_out(facts, NUMBER_CLASSES, (1.0 - NUMBER_SHARE) * present)
    if declared == "text" and not numeric:
        if (temporal >= DATE_SHARE * present or not_temporal <= facts.noise_of(others_of_moments, STANDING_SIGMAS)) \
                and not _stands_out(facts, TEMPORAL_CLASSES, (1.0 - DATE_SHARE) * present):
            written = date_format(facts)
            kind = temporal_kind(facts, written)
            resolution = moment_resolution(facts) if kind == "timestamp" else None
            return ColumnFacts(facts.column, kind, f"DP: {_pct(temporal / present)} of its values read as {kind}s"
                               + (f" written {written}" if written else "") + in_grain(resolution),
                               _share(not_temporal, facts.noise_of(others_of_moments), present),
                               missing_share, value_format=written, resolution=resolution)
        return _categorical_or_identifier(facts, present, "DP: its values are text")
    written = number_format(facts) if declared == "text" else None
    fraction = facts.count("fraction") + (sum(max(0.0, x) for x in facts.decimals[TENS + 1:ZERO]) if written else 0.0)
    # A declared integer column holds no fraction (the source's type is public): only noise could say otherwise.
    # Fractions show in the plain class, or (written numbers) in one decimals slot, standing out of its noise (any
    # of five slots, at the false-alarm rate of one class): the positive parts of five slots' noise, summed, passed
    # the bar in one draw of 60 ("1,234" read as a float).
    slots = facts.decimals[TENS + 1:ZERO] if written else ()
    slot_bar = family_sigmas(STANDING_SIGMAS, len(slots)) * facts.sigma_decimals
    integer = declared == "integer" or (
        facts.count("fraction") <= max(FRACTION_SHARE * present, STANDING_SIGMAS * sigma)
        and all(x <= max(FRACTION_SHARE * present, slot_bar) for x in slots))
    unreadable = _share(not_numbers, facts.noise_of(others_of_numbers), present) \
        if declared == "text" else 0.0
    form = f" written with {written}" if written else ""
    if integer:
        # Nearly unique whole numbers are a measure as often as a key (attendance, votes, a county's population,
        # dollars): kept and binned like any number. A key is dropped by its name (``declared.identifier_reason``)
        # or by the schema's ``drop: true``, which this reason points to.
        unique = nearly_unique(facts)
        step = written_step(facts)
        return ColumnFacts(facts.column, "integer", "DP: its numbers are whole (noisy count of fractional values "
                           f"within the noise){form}{in_places(step)}" + (
                               f"; nearly unique per row (noisy distinct count "
                               f"{_pct(facts.distinct / max(facts.present_standing, 1.0))} of the noisy present "
                               "count): kept as a measure, set drop: true if it is a key") * unique,
                           unreadable, missing_share, value_format=written, precision=step)
    precision = written_precision(facts) if declared in ("text", "float") else None
    return ColumnFacts(facts.column, "float", f"DP: {_pct(fraction / present)} of its numbers have a fraction{form}"
                       + in_places(precision), unreadable, missing_share, value_format=written, precision=precision)


def likeliest_kind(facts: NoisyFacts) -> tuple[str, str | None]:
    """The kind (and written form) of a text column whose facts are inconclusive (post-processing): the group of
    classes whose noisy total stands highest above its own noise (a group of k classes has noise sigma sqrt(k)),
    when that is numbers (integer unless fractions outnumber whole numbers) or dates and timestamps standing
    KIND_SIGMAS deviations out; else categorical, the declared text's own kind. Noise alone lifts one of three
    groups past one deviation half the time: a 106-value text column (a mostly-empty "Shed" / "Gar2") came back
    as timestamps of 1970, every value in the wrong form and the column's type changed."""
    groups = {"numbers": NUMBER_CLASSES, "temporal": TEMPORAL_CLASSES,
              "text": _others((*NUMBER_CLASSES, *TEMPORAL_CLASSES))}
    score = {g: facts.total(c) / (facts.sigma_classes * math.sqrt(len(c))) for g, c in groups.items()}
    best = max(score, key=score.get)
    if score[best] <= KIND_SIGMAS or best == "text":
        return "categorical", None
    if best == "numbers":
        return ("float" if facts.count("fraction") > facts.count("whole") else "integer"), number_format(facts)
    written = date_format(facts)
    return temporal_kind(facts, written), written


def shows_no_value(facts: NoisyFacts) -> bool:
    """The missing count stands out of its noise and no present class does: a column of missing values."""
    return facts.count("missing") > STANDING_SIGMAS * facts.sigma_classes and facts.present_standing == 0.0


def few_distinct(facts: NoisyFacts) -> bool:
    """Some present class stands out of its noise and the noisy distinct count is under FEW_DISTINCT_SHARE of
    the noisy present count (post-processing): values repeat, so a column whose name reads as a key's or as free
    text is kept. A division code (3 values in 1,350 of 2,784 rows) at a 41-column table's noise (222 a count)
    failed "under half by two deviations of that comparison's noise" in one draw of five and was dropped for its
    name; a unique column stands half its present count above the bar, and free text (remarks that repeat, a
    distinct share of 0.6 to 0.9) a tenth or more. Where another class's noise stands in the present count, a
    unique column could pass: it must also not be ``could_be_unique``."""
    present = facts.present_standing
    return present > 0.0 and facts.distinct < FEW_DISTINCT_SHARE * present and not could_be_unique(facts)


def could_be_unique(facts: NoisyFacts) -> bool:
    """The noisy distinct count is within two deviations of that comparison's noise of IDENTIFIER_DISTINCT_SHARE
    of the present values (of the classes that stand out of their noise): the facts do not rule out one value
    per row (post-processing)."""
    present = facts.present_standing
    standing = len(facts.standing_classes())
    spread = math.sqrt(facts.sigma_distinct ** 2 + standing * (IDENTIFIER_DISTINCT_SHARE * facts.sigma_classes) ** 2)
    return facts.distinct >= IDENTIFIER_DISTINCT_SHARE * present - 2.0 * spread


def nearly_unique(facts: NoisyFacts) -> bool:
    """``could_be_unique``, and the present count is IDENTIFIER_EVIDENCE distinct-count sigmas or more: one
    value per row, an identifier or free text, whatever the column's name (post-processing). The allowance keeps
    a unique column from passing as repeated by chance; it moves the bar by a few noise deviations, far less
    than a column of repeated values stands below it."""
    return could_be_unique(facts) and facts.present_standing > IDENTIFIER_EVIDENCE * facts.sigma_distinct


def _categorical_or_identifier(facts: NoisyFacts, present: float, reason: str) -> ColumnFacts:
    rows = max(facts.rows, 1.0)
    missing_share = min(1.0, facts.count("missing") / rows)
    if nearly_unique(facts):
        return ColumnFacts(facts.column, None, "DP: text nearly unique per row (noisy distinct count "
                           f"{_pct(facts.distinct / max(facts.present_standing, 1.0))} of the noisy present count): "
                           "an identifier or free text, dropped", 0.0, missing_share)
    return ColumnFacts(facts.column, "categorical", reason, 0.0, missing_share)


def _share(count: float, noise: float, present: float) -> float:
    """``count / present`` where ``count`` stands out of its noise, else 0 (post-processing)."""
    return min(1.0, count / present) if count > noise and present > 0 else 0.0


def _pct(share: float) -> str:
    return f"{100.0 * max(0.0, min(1.0, share)):.1f}%"
