"""Discovery's measurements: DP column facts, then categories or bounds, then edges or codes.

One code path for ``privsynth schema draft --epsilon`` and the run's discover stage. The caller has
charged ``rho`` (and the categorical thresholds' delta) to the ledger and authorised ``noise``; this
module spends at most ``rho`` in three adaptive rounds (zCDP composes adaptively: rhos add):

* round 0, per column whose type, whole-number-ness or identity no public source settles: the DP
  column facts (``facts``), one share of the column's part;
* round 1: a categorical column's value histogram with thresholds (its categories: a first look at part of
  its share, then a second look, at the pooled rest, for the columns whose first look left values unfound),
  a numeric or temporal column's log-scale or yearly histogram (its bounds);
* round 2: a numeric or temporal column's fine histograms inside its bounds (coded values or edges), and a
  number column's points: public candidates and, where its facts show few distinct values, its own values past
  the threshold for unknown values (its share of the thresholds' delta, as a categorical column's looks).

What round 0 decides is applied before round 1 reads anything; a column it drops is not read again, and
the rho left by columns that need no further round goes to the columns that do.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from privsynth.discovery import facts as F
from privsynth.discovery import points as P
from privsynth.discovery.bounds import Bounds
from privsynth.discovery.categories import (
    FIRST_LOOK_SHARE,
    CategoryRelease,
    dp_categories,
    pool_shares,
    shows_unfound,
    sibling_candidates,
    unfound_mass,
)
from privsynth.discovery.column_release import round_one_bounds, round_two_edges, write_categories
from privsynth.discovery.draft import (
    NUMERIC,
    TEMPORAL,
    ColumnDraft,
    DraftOptions,
    Need,
    bins_for_rows,
    needs,
    public_bounds,
    set_kind,
)
from privsynth.discovery.forms import place_shares
from privsynth.discovery.public_lists import list_candidates, public_complements
from privsynth.errors import ParameterError
from privsynth.privacy.accounting import gaussian_sigma

FACTS_SHARE = 0.2  # of a column's part of rho: its DP column facts
BOUNDS_SHARE = 0.5  # of a numeric column's remaining part: its bounds (the rest places its edges)


def category_rows(rho: float, columns: int, delta_tau: float, *, pooled: int = 0) -> float:
    """The rows a value needs to pass its column's threshold (public arithmetic): at the column's first look
    (``pooled`` 0), or with the second-look parts of ``pooled`` columns added to it (1: its own, as when every
    column is short alike; every categorical column's: the whole pool on one column, the most any column can
    get); each look holds half of ``delta_tau``."""
    from privsynth.discovery.categories import threshold

    part = rho / columns * (1.0 - FACTS_SHARE)
    return threshold(gaussian_sigma(part * (FIRST_LOOK_SHARE + (1.0 - FIRST_LOOK_SHARE) * pooled)), delta_tau / 2.0)


FINDABLE_SHARE = 0.05  # a refusal names the epsilon at which a value held by this share of the rows is found
EPSILON_SEARCH_LIMIT = 1e4


def check_budget_finds_values(rho_at: Callable[[float], float], epsilon: float, columns: int, categorical: int,
                              delta_tau: float, public_rows: int | None, what: str) -> None:
    """Before any charge: refuse a discovery that could find no value of any categorical column. With the
    table's public row count (``--public-rows``; never read from the data), a value needs more rows than the
    table holds at ``epsilon`` (``rho_at(epsilon)``: discovery's rho over ``columns`` read), even at both looks
    with the whole pool of the ``categorical`` columns' second looks on its column. The refusal names the
    epsilon at which a value held by FINDABLE_SHARE of the rows passes its first look. Public arithmetic."""
    if public_rows is None or columns <= 0 or categorical <= 0:
        return
    needed = category_rows(rho_at(epsilon), columns, delta_tau, pooled=categorical)
    if needed < public_rows:
        return
    target = max(FINDABLE_SHARE * public_rows, 2.0)

    def found(eps: float) -> bool:
        return category_rows(rho_at(eps), columns, delta_tau) <= target

    low, high = epsilon, epsilon
    while not found(high) and high < EPSILON_SEARCH_LIMIT:
        low, high = high, high * 2.0
    if found(high):
        for _ in range(40):
            middle = math.sqrt(low * high)
            low, high = (low, middle) if found(middle) else (middle, high)
        need = (f"epsilon {high:.3g} finds a value held by {100 * FINDABLE_SHARE:.0f}% of the rows ({target:,.0f}) "
                "at its first look")
    else:
        need = f"no epsilon up to {EPSILON_SEARCH_LIMIT:g} finds a value held by {target:,.0f} rows"
    raise ParameterError(
        f"{what}: at epsilon {epsilon:g} over {columns} columns a category needs about {needed:,.0f} rows to be "
        f"found even with every second look's budget on its column, and the table has {public_rows:,} "
        f"(--public-rows): no value of any categorical column could be found, so every one would hold only "
        f"<out-of-domain>. Refused before any charge (nothing was read or charged): {need}; public facts "
        "(--public, a schema, --categories) need no budget")


def what_the_budget_finds(rho: float, columns: int, delta_tau: float) -> str:
    """Before the charge, what ``rho`` over ``columns`` read can find (public arithmetic, no row read): the
    rows below which a category is lost (its threshold when every column needs categories after its facts),
    and the present values below which a column's type stays undecided."""
    if columns <= 0 or rho <= 0:
        return "discovery reads no column"
    part = rho / columns
    first = category_rows(rho, columns, delta_tau)
    both = category_rows(rho, columns, delta_tau, pooled=1)
    facts_sigma = gaussian_sigma(part * FACTS_SHARE * F.CLASS_SHARE)
    undecided, stored = F.undecided_present(facts_sigma, "text"), F.undecided_present(facts_sigma, "float")
    return (f"rho {rho:.4g} over {columns} columns: a category held by fewer than about {first:,.0f} rows is lost "
            f"(<out-of-domain>) unless its column's first look shows values unfound (such columns share the budget "
            f"the others did not need by their unfound mass: about {both:,.0f} rows when every column is short "
            f"alike), and a text column with fewer than about {undecided:,.0f} present values (a stored number "
            f"column {stored:,.0f}) keeps its declared type; "
            "public facts (--public, a schema) or a larger epsilon keep more")


# The written form of a typed source's string column whose values read as numbers, dates or moments in ISO text
STRING_FORMS = {"integer": "plain", "float": "plain", "date": "%Y-%m-%d", "timestamp": "%Y-%m-%dT%H:%M:%S"}


def source_kind(d: ColumnDraft) -> str:
    """How the source stores the column: text (CSV, strings) or its declared type."""
    return d.stored


def value_expression(table, d: ColumnDraft):
    """The column's present values in its (now known) type's unit, as an ibis expression; None where a value
    does not read as that type (it becomes missing in the run, ``on_unreadable: missing``)."""
    import ibis

    from privsynth.engine.binning import SourceKind, temporal_unit
    from privsynth.engine.values import clean_text, in_calendar, moment_from_text, number_from_text

    raw, kind, stored = table[d.column.name], d.column.kind, source_kind(d)
    if kind == "categorical":  # each spelling on its own ("MA", "MA "): merged after the release, written back as held
        return ibis.ifelse(clean_text(raw).notnull(), raw.cast("string"), ibis.null("string")) if stored == "text" \
            else raw
    if stored == "text":
        text, written = clean_text(raw), d.entry.get("format")
        if kind in TEMPORAL:
            return temporal_unit(moment_from_text(text, written), SourceKind.TIMESTAMP, kind)
        return number_from_text(text, written)
    if kind in TEMPORAL:
        return temporal_unit(in_calendar(raw), SourceKind.DATE if stored == "date" else SourceKind.TIMESTAMP, kind)
    return raw.cast("float64")


def value_counts(table, d: ColumnDraft) -> tuple[list, np.ndarray]:
    """Distinct present values (in the column's type) and their counts. Private: they stay inside discovery."""
    from privsynth.engine.backends import backend_error
    from privsynth.engine.values import finite, is_whole

    value = value_expression(table, d).name("privsynth_v")
    kept = table.select(value)
    kept = kept.filter(kept.privsynth_v.notnull())
    if d.column.kind in (*NUMERIC, *TEMPORAL):
        kept = kept.filter(finite(kept.privsynth_v))
        if d.column.kind == "integer":
            kept = kept.filter(is_whole(kept.privsynth_v))
    try:
        # Ordered: a GROUP BY's row order varies between runs, and a resumed run's replayed noisy counts
        # (docs/design.md 5.3) must land on the values they were drawn for.
        grouped = kept.group_by("privsynth_v").aggregate(privsynth_n=kept.count()).order_by("privsynth_v").to_pyarrow()
    except Exception as err:  # noqa: BLE001  (the backend's message may quote a value: a value-free one instead)
        raise backend_error(err, f"column {d.column.name!r}") from None
    return grouped.column("privsynth_v").to_pylist(), np.asarray(grouped.column("privsynth_n").to_numpy(),
                                                                    dtype=np.float64)


def measure(table, read: list[ColumnDraft], options: DraftOptions, rho: float, delta_tau: float, noise) -> None:
    """The three rounds (module docstring); total rho spent <= ``rho``. Mutates the drafts' entries."""
    if not read:
        return
    part = rho / len(read)
    released: dict[str, F.NoisyFacts] = {}
    first = [d for d in read if needs(d, options) is Need.FACTS]
    spent = _round_facts(table, first, part * FACTS_SHARE, noise, released)
    later = [d for d in read if needs(d, options) is not None]
    if not later:
        return
    left = (rho - spent) / len(later)
    coarse: dict[str, Bounds] = {}
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    looks: dict[str, tuple[list[str], np.ndarray, CategoryRelease]] = {}
    for d in later:
        need = needs(d, options)
        if need is Need.CATEGORIES:
            raw, counts = value_counts(table, d)
            values = [str(v) for v in raw]
            looks[d.column.name] = (values, counts, dp_categories(values, counts, left * FIRST_LOOK_SHARE,
                                                                  delta_tau / 2.0, noise))
        elif need is Need.EDGES:
            coarse[d.column.name] = Bounds(*public_bounds(d.column, options))
        elif need is Need.BOUNDS:
            values, counts = _numeric_counts(table, d)
            cache[d.column.name] = (values, counts)
            facts = released.get(d.column.name)
            found = round_one_bounds(d, values, counts, left * BOUNDS_SHARE, noise,
                                     has_values=not (facts is not None and F.shows_no_value(facts)),
                                     present=facts.numbers_present_pooled(source_kind(d), list(released.values()))
                                     if facts is not None else None)
            coarse[d.column.name] = _within_public(found, d, options)
    edged = [d for d in later if d.column.name in coarse]
    _second_looks([d for d in later if d.column.name in looks], looks, left, delta_tau, noise, released,
                  pool_to_all=not edged)
    # Round 2: what round 1 left (columns settled or dropped there leave theirs) goes to the columns placing
    # edges, in equal parts: the whole of ``rho`` is spent whenever any column reaches round 2.
    if not edged:
        return
    unspent = rho - sum(sum(d.spent.values()) for d in read)
    for d in edged:
        name = d.column.name
        values, counts = cache.pop(name) if name in cache else _numeric_counts(table, d)
        public = needs(d, options) is Need.EDGES
        bins = options.bins or bins_for_rows(_present_estimate(d, released.get(name)), options.epsilon, options.delta,
                                             columns=len(read))
        # a number column whose DP facts show few values has its own values measured, past the threshold for
        # unknown values (its facts were read, so it holds a share of the thresholds' delta)
        few = name in released and released[name].distinct <= P.MAX_LOOK_VALUES
        round_two_edges(d, values, counts, unspent / len(edged), coarse[name], bins, noise, public=public,
                        delta_tau=delta_tau if few else None)


def _present_estimate(d: ColumnDraft, facts: F.NoisyFacts | None) -> float:
    """A DP estimate of a column's present values (post-processing): its facts', else round 1's noisy total;
    0 where neither was measured (public bounds and a declared type)."""
    if facts is not None:
        return facts.present
    if d.bounds_histogram is not None:
        return float(d.bounds_histogram[1].sum())
    return 0.0


def _second_looks(categorical: list[ColumnDraft], looks: dict, left: float, delta_tau: float, noise,
                  released: dict[str, F.NoisyFacts], pool_to_all: bool) -> None:
    """Round 1's categories by need: every categorical column had a first look at FIRST_LOOK_SHARE of its part
    ``left``; the rest of their parts is pooled and spent on a second look at the columns whose first look left
    values unfound (``shows_unfound``), split by their unfound mass (``pool_shares``): a yes/no column found
    whole gives its budget to a column of rare codes. Where none is short, the pool goes to round 2's edges, or
    (no edges) back to every column in equal parts. The second looks run one column at a time, the largest share
    first, and each measures as public candidates the values the columns sharing one of its values have released
    so far and it has not (``sibling_candidates``; ``dp_categories``' candidates): one grade's school type found
    is a candidate for the next grade's, at 3 deviations rather than the threshold's 6; so is the other member
    of a public pair (``public_complements``: a flag that released "N" looks for "Y", whether or not it shows
    values unfound), and, for a column that released only members of one public list (letters, US states, ISO
    country codes, months, weekdays), the list's other members (``public_lists.list_candidates``, at the bar of
    that many unlikely candidates: ``candidate_sigmas``).
    Adaptive composition: which columns look again, and at which candidates, depends only on earlier DP
    releases (the looks' released values, the facts' noisy present counts); each look is Gaussian at its rho, and
    each look's threshold on the observed values holds half the column's threshold delta (the candidates, a
    public list, need none). Writes every categorical column's entry."""
    if not categorical:
        return
    facts = {d.column.name: released.get(d.column.name) for d in categorical}
    present = {name: f.present_for_values() if f else (None, 0.0) for name, f in facts.items()}
    complements = {name: public_complements(look[2].categories) for name, look in looks.items()}
    listed = {name: list_candidates(look[2].categories) for name, look in looks.items()}
    first_found = {name: look[2].categories for name, look in looks.items()}
    with_candidates = frozenset(name for name in facts if complements[name] or sibling_candidates(first_found, name))
    # a flag that released one of a public pair may hold the other under the threshold, within the unfound noise
    short = {name for name in facts if shows_unfound(looks[name][2], *present[name]) or complements[name]}
    first_rho = left * FIRST_LOOK_SHARE
    pool = left * (1.0 - FIRST_LOOK_SHARE) * len(categorical)
    if short:
        shares = pool_shares({name: unfound_mass(looks[name][2], *present[name]) for name in sorted(short)}, pool,
                             gaussian_sigma(first_rho), delta_tau / 2.0, with_candidates)
    else:
        shares = {d.column.name: pool / len(categorical) for d in categorical} if pool_to_all else {}
    releases = {name: look[2] for name, look in looks.items()}
    for name in sorted(shares, key=lambda n: (-shares[n], n)):
        values, counts, first = looks[name]
        siblings = sibling_candidates({n: r.categories for n, r in releases.items()}, name)
        candidates = tuple(sorted(set(siblings) | set(complements[name])))
        releases[name] = dp_categories(values, counts, shares[name], delta_tau / 2.0, noise, prior=first,
                                       candidates=candidates, listed=listed[name])
    for d in categorical:
        f = facts[d.column.name]
        write_categories(d, releases[d.column.name], first_rho + shares.get(d.column.name, 0.0),
                         f.present if f else None)


def _round_facts(table, reading: list[ColumnDraft], rho_each: float, noise, released: dict[str, F.NoisyFacts]) -> float:
    """Round 0: each column's DP facts at ``rho_each``, applied to its entry; returns the rho spent. Fills
    ``released`` with each column's noisy facts (DP), which the later rounds read."""
    if not reading:
        return 0.0
    counts = F.exact_counts(table, [(d.column.name, source_kind(d)) for d in reading])
    for d in reading:
        noisy = F.release(d.column.name, counts[d.column.name], rho_each, noise)
        d.spent["facts"] = rho_each
        decided = F.decide(noisy, source_kind(d))
        released[d.column.name] = noisy
        if decided.kind is not None and d.column.identifier_reason and not F.few_distinct(noisy):
            # a name that looks like a key's or free text's, and facts that do not show values repeating: dropped
            decided = dataclasses.replace(decided, kind=None, reason=f"{d.column.identifier_reason.split(':')[0]}, "
                                          "and its DP facts do not show values repeating: dropped")
        if decided.kind is None:
            d.entry["drop"] = True
            for key in ("categories", "bounds", "bins", "bin_by", "on_out_of_domain", "nullable"):
                d.entry.pop(key, None)
            d.comments = [x for x in d.comments if not x.startswith("TODO")] + [
                f"drop (rho {rho_each:.4g}): {decided.reason}"]
            continue
        note = f"{decided.reason} (rho {rho_each:.4g})"
        if decided.unreadable_share > 0.001:
            note += (f"; about {100 * decided.unreadable_share:.1f}% of its present values do not read as "
                     f"{decided.kind} and become missing")
        typed_under_dp = d.text_source  # a declared type is the source's, public; a text column's is DP
        set_kind(d, decided.kind, note, lenient=True)
        if decided.value_format is not None:  # the written form: part of the DP type, read and written back in it
            d.entry["format"] = decided.value_format
        elif d.stored == "text" and not d.text_source and decided.kind in STRING_FORMS:
            # numbers, dates and moments a typed source stores as strings (a zip code "98117", "2013-06-21T19:00:00Z")
            # come back as strings; a CSV's are text only because the file has no types
            d.entry["format"] = STRING_FORMS[decided.kind]
        if decided.precision is not None:
            d.entry["precision"] = decided.precision
        shares = place_shares(noisy, decided.precision) if decided.kind == "integer" or (
            decided.kind == "float" and decided.precision is not None) else None
        if shares is not None:  # the places histogram's shares: where on the precision grid values fall (DP)
            d.entry["place_shares"] = list(shares)
        if decided.resolution is not None:
            d.entry["resolution"] = decided.resolution
        d.text_source = False
        d.entry.setdefault("dp_released", [])
        if typed_under_dp and "type" not in d.entry["dp_released"]:
            d.entry["dp_released"] = ["type", *d.entry["dp_released"]]
    return rho_each * len(reading)


def _numeric_counts(table, d: ColumnDraft) -> tuple[np.ndarray, np.ndarray]:
    raw, counts = value_counts(table, d)
    if d.column.kind in TEMPORAL:
        return np.asarray(raw, dtype=np.float64), counts
    return numeric_values(d.column.kind, raw), counts


def _within_public(found: Bounds, d: ColumnDraft, options: DraftOptions) -> Bounds:
    """DP bounds cut to a contract's one-sided bound (public: post-processing with public facts)."""
    p = options.public_facts().get(d.column.name)
    if p is None or p.bounds is None or d.column.kind not in NUMERIC:
        return found
    low = found.low if p.bounds[0] is None else max(found.low, float(p.bounds[0]))
    high = found.high if p.bounds[1] is None else min(found.high, float(p.bounds[1]))
    return Bounds(low, high) if low < high else found


def numeric_values(kind: str, raw: list) -> np.ndarray:
    """Distinct values in the column's unit (temporal: days or seconds since the epoch, UTC, as the encoder)."""
    if kind in TEMPORAL:
        import pandas as pd

        from privsynth.schema import temporal

        values, _ = temporal.values_in_unit(pd.Series(raw), kind)
        return np.nan_to_num(values, nan=0.0)
    return np.asarray([float(v) for v in raw], dtype=np.float64)
