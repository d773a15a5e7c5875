"""Discovered bin edges at round figures (``discovery.figures``): where a reader's questions lie."""

from __future__ import annotations

import numpy as np

from privsynth.discovery import figures as F
from privsynth.discovery import read_out as R
from privsynth.discovery.bounds import Bounds, Level


def test_the_roundest_number_in_a_window_is_taken_nearest_the_cut():
    assert F.roundest_in(44_000.0, 52_000.0, 47_616.0) == 50_000.0
    assert F.roundest_in(1_772.0, 1_952.0, 1_920.0) == 1_800.0
    assert F.roundest_in(44.9302, 44.9431, 44.9409) == 44.94
    assert F.roundest_in(1932.0, 1940.0, 1936.0, integer=True) == 1940.0
    assert F.roundest_in(-93.331, -93.321, -93.3274) == -93.33  # not -93.325: a digit more
    assert F.roundest_in(187.5, 312.5, 250.0) == 200.0
    assert F.roundest_in(0.2, 0.7, 0.5, integer=True) is None  # no whole number between
    assert F.roundest_in(3.0, 3.0, 3.0, integer=True) == 3.0


def test_round_figure_edges_keep_the_bounds_the_order_and_the_count_and_move_a_cut_at_most_a_quarter_bin():
    rng = np.random.default_rng(7)
    for case in range(500):
        integer = case % 3 == 0
        scale = 10.0 ** rng.uniform(-4, 7)
        edges = np.sort(rng.uniform(-1, 1, size=rng.integers(2, 14)) * scale + rng.normal() * scale * 3)
        if integer:
            edges = np.unique(np.round(edges))
        edges = sorted(set(edges.tolist()))
        if len(edges) < 2:
            continue
        out = F.round_figure_edges(edges, integer)
        assert len(out) == len(edges) and out[0] == edges[0] and out[-1] == edges[-1], case
        assert all(a < b for a, b in zip(out, out[1:])), (case, edges, out)
        for i in range(1, len(edges) - 1):
            assert edges[i] - F.ROUND_REACH * (edges[i] - edges[i - 1]) - 1e-9 * scale <= out[i], case
            assert out[i] <= edges[i] + F.ROUND_REACH * (edges[i + 1] - edges[i]) + 1e-9 * scale, case
            if integer:
                assert out[i] == round(out[i]), case


def test_quantile_cuts_read_out_of_a_noisy_histogram_land_on_round_figures():
    # incomes spread over [8,192, 65,536) in cells of 512: the noisy CDF's crossings sit on the cells' edges
    # (47,616; 42,240), which no reader's question names; the read-out's cuts are round figures near them
    edges = np.arange(8192.0, 65536.0 + 1, 512.0)
    centres = (edges[:-1] + edges[1:]) / 2
    counts = 10_000 * np.exp(-0.5 * ((centres - 35_000) / 12_000) ** 2)
    counts = counts / counts.sum() * 10_000
    level = Level(1, edges, counts + np.random.default_rng(1).normal(0, 5, len(counts)), 5.0)
    fine = R.read_out([level], False, 8, Bounds(8192.0, 65536.0, (8192.0, 65536.0)))
    interior = fine.edges[1:-1]
    assert len(interior) >= 6
    for cut in interior:  # two significant digits at most: 15,000, 20,000, 37,000, 50,000
        assert np.isclose(cut, float(f"{cut:.2g}")), fine.edges
    before = [8192.0, 10623.7, 16256.0, 20288.0, 25664.0, 33280.0, 36864.0, 42240.0, 47616.0, 65536.0]
    assert F.round_figure_edges(before) == [8192.0, 12000.0, 15000.0, 20000.0, 25000.0, 34000.0, 36000.0, 42000.0,
                                            50000.0, 65536.0]


def test_a_cut_where_the_data_begin_stays_when_the_move_would_hand_empty_space_to_a_bin_of_data():
    # ages from 6.6 (tenths), empty space from the bounds' 4.0: the cut at 6.6 would move to 6.0, and the bin
    # [6.0, 7.0) would hold the empty stretch [6.0, 6.6), where values are drawn (wrong ones: below every age)
    def shows_data(low: float, high: float) -> bool:
        return min(high, 8.5) - max(low, 6.6) > 0.05

    edges = [4.0, 6.6, 7.0, 7.4, 8.5]
    assert F.round_figure_edges(edges)[1] == 6.0  # unguarded
    guarded = F.round_figure_edges(edges, shows_data=shows_data)
    assert guarded[1] == 6.6 and guarded[2:] == F.round_figure_edges(edges)[2:]


def test_shows_data_reads_the_noisy_cells_of_a_span_against_their_noise():
    edges = np.arange(0.0, 11.0)
    level = Level(1, edges, np.array([0, 0, 0, 1, -2, 40, 50, 45, 0, 0], dtype=float), 10.0)
    assert not R.shows_data(level, 0.0, 5.0)  # noise only: 2 + ... under 2 deviations of 5 cells
    assert R.shows_data(level, 4.0, 8.0)
    assert not R.shows_data(level, 8.0, 10.0)


def test_every_bin_holds_a_number_of_the_column_s_precision():
    from privsynth.discovery.figures import edges_holding_values

    # a constant read out into bins around it: one bin, the bounds kept
    assert edges_holding_values((7.49995, 7.49996, 7.49998, 7.5, 7.50001, 7.50007), 1) == (7.49995, 7.50007)
    # the sliver beside a point at 0 goes; the point's own bin [0, 5e-10) holds 0.00
    assert edges_holding_values((0.0, 5e-10, 0.00053, 300.0, 2048.0), 2) == (0.0, 5e-10, 300.0, 2048.0)
    assert edges_holding_values((0.0, 10.0, 20.0, 20.004), 2) == (0.0, 10.0, 20.0, 20.004)  # [20, 20.004] holds 20
    assert edges_holding_values((0.0, 10.0, 10.004, 20.0), 2) == (0.0, 10.0, 10.004, 20.0)  # 10.00, then 10.01
    assert edges_holding_values((0.0, 10.001, 10.004, 20.0), 2) == (0.0, 10.001, 20.0)  # [10.001, 10.004): none
    # none anywhere: one bin grown to the nearer number of the precision
    assert edges_holding_values((1.001, 1.002, 1.003), 1) == (1.0, 1.003)
    assert edges_holding_values((0.25, 0.3125, 0.5), 0) == (0.0, 0.5)
    assert edges_holding_values((0.5, 0.625, 0.8), 0) == (0.5, 1.0)
    assert edges_holding_values((3.0, 5.0, 7.0), -1) == (0.0, 7.0)


def test_a_constant_decimal_column_comes_back_as_its_value(tmp_path):
    import pandas as pd

    import privsynth

    rng = np.random.default_rng(0)
    n = 30_000
    pd.DataFrame({"rate": np.full(n, 7.5), "g": rng.choice(["a", "b", "c"], n)}).to_csv(tmp_path / "t.csv",
                                                                                      index=False)
    release = privsynth.synthesize(str(tmp_path / "t.csv"), epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}",
                                   unlimited=True, seed=2, output=tmp_path / "run", release_store=tmp_path / "s")
    rate = pd.to_numeric(release.to_pandas()["rate"])
    assert (rate.dropna() == 7.5).all()  # never 7.500065: a value the column, written in tenths, cannot hold


def test_a_bin_wider_than_a_multiple_of_the_interior_s_mean_is_split_evenly_at_round_figures():
    # interior bins [100, 400) average 100 wide; at the default factor (3) the cap is 300: the tail [400, 1000)
    # becomes two parts, at a factor of 2 (cap 200) three
    assert F.WIDE_BIN_FACTOR == 3.0
    edges = [0.0, 100.0, 200.0, 300.0, 400.0, 1000.0]
    assert F.split_wide_bins(edges) == [0.0, 100.0, 200.0, 300.0, 400.0, 700.0, 1000.0]
    assert F.split_wide_bins(edges, factor=2.0) == [0.0, 100.0, 200.0, 300.0, 400.0, 600.0, 800.0, 1000.0]
    # interior mean 10, cap 20: [40, 95) in three parts of 18.33, the cuts 58.33 and 76.67 at round figures
    assert F.split_wide_bins([0.0, 10.0, 20.0, 30.0, 40.0, 95.0], factor=2.0) == [0.0, 10.0, 20.0, 30.0, 40.0, 60.0,
                                                                                 80.0, 95.0]
    # an integer column's cuts are whole: cap 6, [12, 31) in four parts of 4.75 (16.75, 21.5, 26.25), each at the
    # roundest whole number within 1.19 of it (even numbers: 10s and 5s are out of reach)
    assert F.split_wide_bins([0.0, 3.0, 6.0, 9.0, 12.0, 31.0], integer=True, factor=2.0) == [
        0.0, 3.0, 6.0, 9.0, 12.0, 16.0, 22.0, 26.0, 31.0]
    # bins near the mean width, and columns of fewer than MIN_BINS_TO_SPLIT bins, stay as they are
    assert F.split_wide_bins([0.0, 10.0, 20.0, 30.0, 45.0]) == [0.0, 10.0, 20.0, 30.0, 45.0]
    assert F.split_wide_bins([0.0, 1.0, 2.0, 100.0]) == [0.0, 1.0, 2.0, 100.0]


def test_a_column_spanning_decades_is_split_on_the_log_scale():
    # votes from 4: on the log scale the tail bin [1,328, 16,384) is 2.5 against an interior mean of 1.06, under the
    # cap; even parts on the linear scale would have been eight bins
    votes = [4.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1328.0, 16384.0, 32768.0]
    assert F.split_wide_bins(votes, integer=True) == votes
    # dollars spent from 0: the first bin is not split, the tail [3,000, 100,000) is cut at its geometric middle
    # (17,320), moved to 20,000
    assert F.split_wide_bins([0.0, 50.0, 200.0, 500.0, 1000.0, 3000.0, 100000.0]) == [0.0, 50.0, 200.0, 500.0,
                                                                                      1000.0, 3000.0, 20000.0,
                                                                                      100000.0]


def test_a_split_stays_only_where_both_parts_show_data():
    # the data end at 700: the part [800, 1000) of the tail shows none, so its cut goes and [600, 1000) stays one bin
    edges = [0.0, 100.0, 200.0, 300.0, 400.0, 1000.0]
    assert F.split_wide_bins(edges, factor=2.0, shows_data=lambda u, v: u < 700.0) == [0.0, 100.0, 200.0, 300.0,
                                                                                       400.0, 600.0, 1000.0]
    assert F.split_wide_bins(edges, factor=2.0, shows_data=lambda u, v: u < 500.0) == [0.0, 100.0, 200.0, 300.0,
                                                                                       400.0, 1000.0]


def test_a_thinning_tail_read_out_of_a_noisy_histogram_is_split_where_the_rows_reach():
    # balances: most rows in 300-1,300, a tail thinning to 2,600 where a rare outcome would gather. Quantile cuts
    # at 8 bins leave one bin over [1,300, 2,600+); the read-out splits what the rows reach into parts near the
    # interior's width, and the empty octave beyond 2,700 stays whole
    edges = np.arange(0.0, 4096.0 + 1, 16.0)
    centres = (edges[:-1] + edges[1:]) / 2
    counts = np.where(centres < 2700, np.exp(-0.5 * ((centres - 800) / 380) ** 2), 0.0)
    counts = counts / counts.sum() * 10_000
    level = Level(1, edges, counts + np.random.default_rng(3).normal(0, 2, len(counts)), 2.0)
    fine = R.read_out([level], False, 8, Bounds(0.0, 4096.0, (0.0, 4096.0)))
    widths = np.diff(fine.edges)
    interior = (fine.edges[-2] - fine.edges[1]) / (len(fine.edges) - 3)
    holding = [(a, b) for a, b in zip(fine.edges[:-1], fine.edges[1:]) if a < 2500]
    assert all(b - a <= F.WIDE_BIN_FACTOR * interior for a, b in holding[1:]), fine.edges
    assert len(fine.edges) - 1 > 8 and widths.max() < 2000, fine.edges
