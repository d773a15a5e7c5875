"""Round 1's bounds checked against the DP facts' count of present numbers (``discovery.unaccounted``)."""

from __future__ import annotations

import numpy as np
from conftest import SeededDraws

from privsynth.discovery import bounds as B
from privsynth.discovery import unaccounted as U

RHO = 2.816e-5  # a 74-column table's round-1 rho: sigma 133 a cell
PRESENT_SD = 421.0  # the facts' deviation of a stored number's present count at that table's rho


def masonry(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A masonry veneer's area in 2,907 houses: 60% zeros, the rest spread thinly over [16, 1,600]."""
    raw = np.concatenate([np.zeros(1_748), rng.integers(16, 32, 34), rng.integers(32, 64, 70),
                          rng.integers(64, 128, 199), rng.integers(128, 256, 408), rng.integers(256, 512, 328),
                          rng.integers(512, 1024, 97), rng.integers(1024, 1601, 14)]).astype(float)
    return np.unique(raw, return_counts=True)


def test_cells_that_cannot_hold_a_value_are_skipped():
    edges = B.log_edges()
    holds = U.can_hold(edges, 1.0)
    centres = (edges[:-1] + edges[1:]) / 2.0
    assert holds[(centres > 0) & (centres < 1)].sum() == 0  # an integer's octaves inside (0, 1)
    assert holds[int(np.searchsorted(edges, 0.0, side="right")) - 1]  # the zeros' cell
    assert holds[centres > 1].all()
    assert U.can_hold(edges, 0.0).all()  # a float of unknown precision: any cell
    cents = U.can_hold(edges, 0.01)
    assert not cents[(centres > 0) & (edges[1:] <= 0.01)].any() and cents[(centres > 0.01)].all()


def test_rows_spread_thinly_beyond_a_spike_join_the_bounds():
    """60% zeros and the rest over 7 octaves, no octave passing round 1's threshold in most draws: the bounds were
    the zeros' cell and the run wrote 40% of the column as 0 to 2. The DP count of present numbers shows the rows
    the bounds miss; the stretch that holds them joins the bounds, not octaves of empty space far beyond."""
    edges = B.log_edges()
    values, counts = masonry(np.random.default_rng(0))
    grown = shown = 0
    for seed in range(40):
        noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), RHO, SeededDraws(seed))
        found = B.coarse_bounds(noisy, sigma, edges, integer=True)
        present = float(counts.sum()) + np.random.default_rng(seed).normal(0.0, PRESENT_SD)
        out = U.account_for_present(found, noisy, sigma, edges, True, present, PRESENT_SD, 1.0)
        assert out.low == found.low and out.high >= found.high and out.core == found.core, (seed, found, out)
        assert out.high <= 8_192.0, (seed, out)  # never far past the rows
        held, _ = U.held_by(noisy, edges, U.can_hold(edges, 1.0), found.low, found.high)
        if found.high == 1.0 and present - held > U.UNACCOUNTED_SIGMAS * np.hypot(PRESENT_SD, sigma):
            shown += 1  # a zeros-only bound, and the facts' count shows the rows it misses
            grown += out.high >= 512.0
    assert shown >= 6 and grown >= 0.75 * shown, (shown, grown)


def test_bounds_that_hold_the_rows_are_left_alone():
    """Bounds that already hold every row stay as they are in (nearly) every draw: the facts' count agrees with
    their cells, and an empty stretch beyond them cannot pass the joint evidence."""
    edges = B.log_edges()
    values, counts = np.arange(64.0, 128.0), np.full(64, 40.0)  # one octave
    changed = 0
    for seed in range(200):
        noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), RHO, SeededDraws(seed))
        found = B.coarse_bounds(noisy, sigma, edges, integer=True)
        if found is None:
            continue
        present = float(counts.sum()) + np.random.default_rng(1_000 + seed).normal(0.0, PRESENT_SD)
        out = U.account_for_present(found, noisy, sigma, edges, True, present, PRESENT_SD, 1.0)
        changed += out != found
    assert changed <= 4  # 2%


def test_a_missing_count_within_its_noise_grows_nothing():
    edges = B.log_edges()
    noisy = np.zeros(len(edges) - 1)
    zero = int(np.searchsorted(edges, 0.0, side="right")) - 1
    noisy[zero] = 1_000.0
    noisy[zero + 40] = 600.0  # a stretch beyond that shows rows the count does not miss
    found = B.Bounds(0.0, 1.0, (0.0, 1.0))
    assert U.account_for_present(found, noisy, 100.0, edges, True, 1_100.0, 100.0, 1.0) == found
    grown = U.account_for_present(found, noisy, 100.0, edges, True, 1_600.0, 100.0, 1.0)
    assert grown.low == 0.0 and grown.high == float(edges[zero + 41])


def test_a_stored_numbers_present_count_is_sharpened_by_the_row_count_of_the_other_columns():
    """Hand-computed: a stored float's whole + fraction classes (880, variance 2 x 10^2) and the other columns' row
    count less its missing class (1,000 - 100, variance 10^2 x (1 + 18 / 3): 18 classes summed per column) weighed by
    inverse variance: (880 / 200 + 900 / 700) / (1/200 + 1/700) = 884.444, with deviation 1 / sqrt(1/200 + 1/700) =
    12.472. A text column keeps its number classes alone."""
    from privsynth.discovery.facts import NoisyFacts
    from privsynth.discovery.row_reads import CLASSES

    def facts(**counts: float) -> NoisyFacts:
        return NoisyFacts("c", tuple(float(counts.get(c, 0.0)) for c in CLASSES), 10.0, 10.0, 10.0)

    own = facts(missing=100.0, whole=880.0)
    others = [facts(missing=1_000.0), facts(whole=1_000.0), facts(text=1_000.0)]
    present, sd = own.numbers_present_pooled("float", [own, *others])
    assert len(CLASSES) == 18
    assert abs(present - 7960.0 / 9.0) < 1e-9 and abs(sd - (1 / 200 + 1 / 700) ** -0.5) < 1e-9
    assert own.numbers_present_pooled("text", others) == own.numbers_present("text")
    assert own.numbers_present_pooled("float", [own]) == own.numbers_present("float")  # no other column: unchanged
    assert own.numbers_present("integer") == (880.0, 10.0)  # a stored integer's whole class alone
