"""DP categories: a Gaussian histogram with thresholding over the observed values (``dp_categories``).

Each observed value's count gets N(0, sigma^2) noise, sigma = 1/sqrt(2 rho) (L2 sensitivity 1: one
record moves one value's count), so rho-zCDP for a fixed set of values; a value is released only when its noisy count
exceeds tau = 1 + sigma * z, z = Phi^{-1}(1 - delta_tau). The set of observed values depends on the data: a
value present in one neighbour only has count 1 there and is released with probability <= delta_tau.
So the column is (epsilon(rho, delta'), delta' + delta_tau)-DP for every delta'. The ledger's currency
is rho-zCDP, which cannot state a pure delta term: the Gaussian part is charged as rho and the
thresholds' total delta is held to ``THRESHOLD_DELTA_FRACTION`` of the statement's delta, split over
the columns whose facts are read (a categorical column's looks; a number column's own values, measured
where its facts show few: ``points.value_points``; the cost's notes and the draft's header say so).

Two looks (``discovery.discover``): each categorical column first looks at FIRST_LOOK_SHARE of its rho
with half its delta_tau; the rest of every column's rho is pooled for a second look, at the same values,
by the columns whose first look left present values unfound (``shows_unfound``), in proportion to the mass
each may have left unfound (``unfound_mass``: the estimate plus one deviation; ``pool_shares``). The second look's noisy
counts are averaged with the first's by inverse variance (one Gaussian measurement at the summed rho) and
thresholded with the other half of delta_tau, so a value seen once is released with probability at most
delta_tau over both looks, and the column's rho is the sum of its looks'.

Values another column released are public candidates (``sibling_candidates``): columns whose released
categories overlap (yes/no answers, one code list per year or per grade) often share values a first look
missed in one of them. A second look measures a column's candidates on their own Gaussian histogram over that
public list, every candidate counted whether or not the column holds it (0 if not), and keeps those above
CANDIDATE_SIGMAS deviations: a histogram over a public domain needs no threshold delta, so a value held by a
few hundred rows passes where the observed values' threshold, about 6 deviations, would lose it. So are the
partners of a public pair (``public_lists.public_complements``). Where a column released only members of one public list
(letters, US states, ISO country codes, months, weekdays: ``public_lists``), the list's other members are
candidates too, unlikely ones each, kept above ``candidate_sigmas`` deviations for their number (3.9 for 25
letters, 4.3 for 54 states), so that any absent member passes at the rate one absent partner does. A likely
candidate keeps its 3 deviations: an absent one kept costs a category of noise that the release draws
few rows into, a present one lost costs all its rows. The candidates are left out of the observed values'
histogram of that look, so one record moves one cell of the two: the look costs its rho, as before.

A drafted column keeps at most ``MAX_CATEGORIES`` values (the largest noisy counts: post-processing);
every other value becomes ``<out-of-domain>``, and the column is marked ``dp_released: [categories]``,
so the run's mostly-in-domain rule, written for public lists, does not apply to it: draft and
validation agree by construction, whatever the noise did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from privsynth.discovery.forms import family_sigmas
from privsynth.privacy.accounting import gaussian_sigma

# The thresholds' total delta, as a fraction of the statement's delta. A tenth lowers every category threshold
# by about 8% (z at a 100x larger delta_tau) and costs the whole run 0.6% of its rho (converted at 0.9 delta);
# (epsilon, delta) partition selection rules, charged in zCDP, need 3.5-4x the rows (bench_partition_selection).
THRESHOLD_DELTA_FRACTION = 0.1
MAX_CATEGORIES = 64


def threshold(sigma: float, delta_tau: float) -> float:
    """tau = 1 + sigma * Phi^{-1}(1 - delta_tau): a count-1 value's noisy count exceeds it w.p. delta_tau."""
    return 1.0 + sigma * float(norm.isf(delta_tau))


FIRST_LOOK_SHARE = 0.4  # of a categorical column's rho: its first look; the rest is pooled (``shows_unfound``)
UNFOUND_SIGMAS = 1.0  # a first look leaves values unfound when the present count exceeds the kept mass by this
# many deviations: a column flagged in vain only shares the pool, one missed loses a category


@dataclass(frozen=True)
class CategoryRelease:
    """A categorical column's DP release: the values kept, the noise and threshold used.

    ``observed`` is PRIVATE: every observed value's noisy count, in the input's order, including values that did
    not pass the threshold (which values exist is what the threshold protects). It stays in memory for a second
    look (``dp_categories``'s ``prior``) and is never written, logged or compared."""

    categories: tuple[str, ...]
    sigma: float
    tau: float
    kept_mass: float = 0.0  # the kept values' noisy counts, summed (post-processing)
    noisy: tuple[float, ...] = ()  # each kept value's noisy count, in ``categories`` order
    noisy_sigmas: tuple[float, ...] = ()  # the standard deviation of each kept value's noise, in that order
    bars: tuple[float, ...] = ()  # the noisy count each kept value had to pass (tau, or a candidate's bar)
    observed: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)


def shows_unfound(release: CategoryRelease, present: float | None, present_sd: float) -> bool:
    """Whether a first look left present values unfound beyond its noise (post-processing): the column's noisy
    present count (its DP facts, deviation ``present_sd``) exceeds the kept values' noisy total by UNFOUND_SIGMAS
    deviations of the difference. True when no present count was measured (nothing shows the column complete)."""
    if present is None:
        return True
    return present - release.kept_mass > UNFOUND_SIGMAS * _unfound_sd(release, present_sd)


def unfound_mass(release: CategoryRelease, present: float | None, present_sd: float) -> float | None:
    """What a column may be short of: a DP estimate of its present values in no kept category (its noisy present
    count less the kept values' noisy total) plus one deviation of that estimate, at least 0 (post-processing);
    None when no present count was measured. The deviation keeps a column whose estimate is as noisy as the
    values it may have lost from being starved: on 4,406 rows the estimate's deviation (169) is two fifths
    of a yes/no column's 402 unfound "yes", and split by the estimate alone such a column drew a share too small
    to find it in 2 runs of 8."""
    if present is None:
        return None
    return max(present - release.kept_mass + _unfound_sd(release, present_sd), 0.0)


def _unfound_sd(release: CategoryRelease, present_sd: float) -> float:
    """The deviation of the unfound estimate: the present count's and the kept values' noisy total's."""
    return math.hypot(present_sd, release.sigma * math.sqrt(max(len(release.noisy), 1)))


def pool_shares(unfound: dict[str, float | None], pool: float, first_sigma: float,
                delta_tau: float, with_candidates: frozenset[str] = frozenset()) -> dict[str, float]:
    """The second looks' rho, ``pool`` in all, split over the columns short of values in proportion to their
    unfound mass (``unfound_mass``, an upper estimate; a column without a present count is weighed as the most
    unfound): a code column missing half its rows needs more than one missing a few. A column whose whole
    unfound mass, held by one value, would stay under its two looks' threshold (``first_sigma`` and its share,
    ``delta_tau`` for the second look) could find nothing: the furthest under gives its share back to the
    others, one at a time, while any other could still find a value. A column of ``with_candidates`` measures
    likely public candidates (partners, siblings' values) at its second look, whose bar is CANDIDATE_SIGMAS
    deviations of that look alone: it can find what that bar reaches (the rest of a public list is unlikely
    candidates: they keep no share). Post-processing of DP estimates; the shares sum to ``pool``."""
    if not unfound:
        return {}
    known = [u for u in unfound.values() if u is not None]
    weight = {name: max(u if u is not None else max(known, default=1.0), 1.0) for name, u in unfound.items()}

    def reach(name: str, total: float) -> float:
        second = gaussian_sigma(pool * weight[name] / total)
        bar = threshold((first_sigma ** -2 + second ** -2) ** -0.5, delta_tau)
        return min(bar, CANDIDATE_SIGMAS * second) if name in with_candidates else bar

    while len(weight) > 1:
        total = sum(weight.values())
        under = {n: u / reach(n, total) for n in weight if (u := unfound[n]) is not None}
        hopeless = {n: ratio for n, ratio in under.items() if ratio < 1.0}
        if not hopeless or len(hopeless) == len(weight):
            break
        del weight[min(hopeless, key=hopeless.__getitem__)]
    total = sum(weight.values())
    return {name: pool * w / total for name, w in weight.items()}


CANDIDATE_SIGMAS = 3.0  # one public candidate is kept when its noisy count passes this many deviations: an absent
# one passes with probability 0.13% (a category of noise: the release draws few rows into it)


def candidate_sigmas(candidates: int) -> float:
    """The deviations each of a look's ``candidates`` must pass for any absent one to pass by noise alone at the
    rate one passes CANDIDATE_SIGMAS (0.13%; ``forms.family_sigmas``): 3 for one, 3.9 for 25 letters. Public
    arithmetic: the candidates' number is a function of DP releases."""
    return family_sigmas(CANDIDATE_SIGMAS, candidates)


def sibling_candidates(found: dict[str, tuple[str, ...]], name: str) -> tuple[str, ...]:
    """The values released for the columns other than ``name`` whose releases share a value with its own, less
    its own: public, post-processing of the columns' DP releases."""
    own = set(found[name])
    return tuple(sorted(set().union(*(set(other) for n, other in found.items() if n != name and own & set(other)))
                        - own))


def merged_spellings(release: CategoryRelease) -> tuple[str, ...]:
    """One category per value under the one text rule (blanks around a value are not part of it): of the kept
    spellings of one value ("MA", "MA "), the one with the largest noisy count, which the synthetic table
    writes back as the table holds it (post-processing of the release)."""
    best: dict[str, tuple[float, str]] = {}
    for spelling, count in zip(release.categories, release.noisy or (0.0,) * len(release.categories)):
        key = spelling.strip()
        if key not in best or count > best[key][0]:
            best[key] = (count, spelling)
    return tuple(sorted(spelling for _, spelling in best.values()))


EARLIER_MARGIN_SIGMAS = 2.0  # a kept value's count joins the mechanism's estimate only this far past its bar


def category_counts(release: CategoryRelease) -> dict[str, tuple[float, float]]:
    """Each category of ``merged_spellings`` with its noisy count and the deviation of its noise, for the
    mechanism to join with its own 1-way measurement (post-processing: DP outputs already charged).

    A category's count sums its kept spellings' (their variances add). A value was kept because its noisy count
    passed a bar, so a count near the bar is biased upwards (the noise that lifted it is part of it): a category
    whose kept spellings did not all pass their bars by EARLIER_MARGIN_SIGMAS deviations is left out, so the
    counts joined are those the selection barely touched. Rows of a spelling no look kept are not in the sum,
    so a column of many unkept spellings of one value reads low there."""
    parts: dict[str, list[tuple[float, float, float]]] = {}
    sigmas = release.noisy_sigmas or (release.sigma,) * len(release.categories)
    bars = release.bars or (release.tau,) * len(release.categories)
    for spelling, count, sigma, bar in zip(release.categories, release.noisy, sigmas, bars):
        parts.setdefault(spelling.strip(), []).append((count, sigma, bar))
    names = {spelling.strip(): spelling for spelling in merged_spellings(release)}
    out = {}
    for key, kept in parts.items():
        if all(count >= bar + EARLIER_MARGIN_SIGMAS * sigma for count, sigma, bar in kept):
            out[names[key]] = (sum(c for c, _, _ in kept), math.sqrt(sum(s * s for _, s, _ in kept)))
    return out


def dp_categories(values: Sequence[str], counts: np.ndarray, rho: float, delta_tau: float, noise,
                  max_categories: int = MAX_CATEGORIES, prior: CategoryRelease | None = None,
                  candidates: Sequence[str] = (), listed: Sequence[str] = ()) -> CategoryRelease:
    """Gaussian histogram with thresholding over the observed values (see the module docstring).

    ``prior``: a first look at the same values (same order). This look's noisy counts are averaged with its,
    weighted by inverse variance: one Gaussian measurement at the two looks' summed rho (post-processing of
    both), thresholded at that noise. A value seen once passes each look's threshold with probability at most
    its ``delta_tau``: the column's thresholds hold delta_tau of both looks together.

    ``candidates`` (a second look): public values measured on their own histogram (module docstring), each
    counted whether the column holds it or not, and kept above CANDIDATE_SIGMAS deviations of this look's noise;
    ``listed``: unlikely public candidates, a list of their own (``public_lists.list_candidates``; those also in
    ``candidates`` are measured there), kept above ``candidate_sigmas`` deviations for their number; the likely
    ones keep CANDIDATE_SIGMAS. The observed values among either are left out of the thresholded histogram, so each
    record moves one cell of the look."""
    sigma = gaussian_sigma(rho)
    counts = np.asarray(counts, dtype=np.float64)
    likely = set(candidates)
    unlikely = tuple(v for v in listed if v not in likely)
    bars_of_candidates = [CANDIDATE_SIGMAS * sigma] * len(candidates) + \
        [candidate_sigmas(len(unlikely)) * sigma] * len(unlikely)
    candidates = (*candidates, *unlikely)
    measured_apart = set(candidates)
    observed = np.array([str(v) not in measured_apart for v in values], dtype=bool)
    held = dict(zip((str(v) for v in values), counts))
    cells = np.concatenate([counts[observed], [held.get(c, 0.0) for c in candidates]])
    # one histogram over disjoint cells (the observed values less the candidates, then the candidates): one draw
    drawn = noise.add_gaussian(cells, sigma, sensitivity=1.0) if len(cells) else np.zeros(0)
    noisy_counts, found = drawn[:int(observed.sum())], drawn[int(observed.sum()):]
    combined = sigma
    if prior is not None:
        if prior.observed.shape != counts.shape:
            raise ValueError("a second look must read the values of its first, in the same order")
        w_prior, w_this = prior.sigma ** -2, sigma ** -2
        noisy_counts = (w_prior * prior.observed[observed] + w_this * noisy_counts) / (w_prior + w_this)
        combined = (w_prior + w_this) ** -0.5
    tau = threshold(combined, delta_tau)
    names = [*(str(v) for v, o in zip(values, observed) if o), *candidates]
    score = np.concatenate([noisy_counts, found])
    keep = np.concatenate([noisy_counts > tau, found > np.asarray(bars_of_candidates)])
    if keep.sum() > max_categories:  # the largest noisy counts (post-processing)
        cut = np.sort(score[keep])[-max_categories]
        keep &= score >= cut
    n_observed = int(observed.sum())
    scales = np.concatenate([np.full(n_observed, combined), np.full(len(found), sigma)])
    bars = np.concatenate([np.full(n_observed, tau), np.asarray(bars_of_candidates)])
    kept = sorted((v, float(c), float(s), float(b)) for v, c, s, b, k in zip(names, score, scales, bars, keep) if k)
    full = np.full(len(counts), -np.inf)  # the observed values' noisy counts, for a later look (private)
    full[observed] = noisy_counts
    return CategoryRelease(tuple(k[0] for k in kept), combined, tau, float(score[keep].sum()),
                           tuple(k[1] for k in kept), tuple(k[2] for k in kept), tuple(k[3] for k in kept), full)
