"""Mass points of a number column (issue 35.3): a sentinel or round value many rows hold is written exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SeededDraws

import privsynth
from privsynth.discovery import points as P
from privsynth.schema import parse_schema
from privsynth.schema.encoding import decode_codes, encode_codes


class NoNoise:
    def add_gaussian(self, x, sigma, *, sensitivity=None):
        return np.asarray(x, dtype=float)


def _released(tmp_path, name: str, values: np.ndarray, rng) -> tuple[str, pd.Series]:
    """A no-schema run (epsilon 1, seeded) of ``values`` beside a two-level column: its schema.yaml text and the
    synthetic column as numbers."""
    pd.DataFrame({name: values, "g": rng.choice(["a", "b"], len(values))}).to_csv(tmp_path / "t.csv", index=False)
    release = privsynth.synthesize(str(tmp_path / "t.csv"), epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}",
                                   unlimited=True, seed=5, output=tmp_path / "run", release_store=tmp_path / "s")
    return (release.run_dir / "schema.yaml").read_text(), pd.to_numeric(release.to_pandas()[name])


def test_candidates_are_public_and_inside_the_bounds():
    assert P.candidates(0.0, 120.0, integer=False) == (1.0, 2.0, 5.0, 9.0, 10.0, 20.0, 50.0, 99.0, 100.0)
    assert -1.0 in P.candidates(-5.0, 10.0, False) and 0.0 not in P.candidates(-5.0, 10.0, False)  # the zeros' cell
    assert P.candidates(0.0, 120.0, integer=True) == ()  # a cell per integer already: codes keep all the rho
    assert P.candidates(-1.0, 10_000_000.0, integer=True)[-1] == 9999999.0


def test_a_candidate_is_a_point_when_it_holds_its_share():
    values = np.array([3.5, 99.0, 100.0, 250.0])
    counts = np.array([9000.0, 500.0, 100.0, 400.0])
    points, held, _ = P.value_points(values, counts, P.candidates(0.0, 300.0, False), rho=1.0, noise=NoNoise(),
                                     present=10_000.0, delta_tau=None)
    assert points == (99.0,) and held == 500.0  # 100 holds 1%: below POINT_SHARE; 3.5 is no candidate


def test_round_figures_of_the_one_two_five_series_are_points():
    """Loans of 5,000 and 20,000 (heaps a form's defaults make), company sizes of 20 and 500: figures of the 1-2-5
    series are public candidates, written exactly; 12,000 is none, and stays in its bin."""
    values = np.array([5_000.0, 12_000.0, 20_000.0, 7_312.5])
    counts = np.array([800.0, 700.0, 600.0, 7_900.0])
    points, held, _ = P.value_points(values, counts, P.candidates(500.0, 40_000.0, False), rho=1.0,
                                     noise=NoNoise(), present=10_000.0, delta_tau=None)
    assert points == (5_000.0, 20_000.0) and held == 1_400.0
    assert {20.0, 500.0, 5_000.0} <= set(P.candidates(1.0, 10_368.0, integer=False))


def test_a_value_most_rows_hold_is_a_point_only_past_the_threshold_for_unknown_values():
    """With the threshold's delta, the column's own values are measured too: a value is a point when its noisy count
    passes tau = 1 + sigma z(delta_tau) (a value one neighbour holds alone is released with probability at most
    delta_tau) and POINT_SHARE of the column; a candidate passes the lower bar of a public list."""
    from privsynth.discovery.categories import threshold

    values = np.array([3.5, 6.904679999999999, 8.05546, 99.0, 250.0])
    counts = np.array([9_000.0, 2_000.0, 60.0, 300.0, 1.0])
    cands = P.candidates(0.0, 300.0, False)
    rho, delta_tau = 0.5 / 30.0 ** 2, 1e-11  # sigma 30
    points, _, sigma = P.value_points(values, counts, cands, rho, NoNoise(), 11_361.0, delta_tau)
    assert sigma == pytest.approx(30.0) and 60.0 < threshold(sigma, delta_tau) < 300.0
    assert points == (3.5, 6.904679999999999, 99.0)  # exactly as held; 8.05546 under tau, 250 no candidate
    # one row's value: released with probability at most delta_tau over 20,000 draws (none here)
    lone = [P.value_points(np.array([250.0, 7.0]), np.array([1.0, 9_000.0]), (), rho, SeededDraws(s), 9_001.0,
                           delta_tau)[0] for s in range(20_000)]
    assert all(p == (7.0,) for p in lone)


def test_point_bins_decode_to_the_point_exactly():
    edges = P.with_points((0.0, 50.0, 5_000_000.0, 12_000_000.0), (9999999.0,), integer=False)
    assert 9999999.0 in edges and len(edges) == 6
    schema = parse_schema({"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 12_000_000],
                                                     "bins": list(edges)}]})
    codes = encode_codes(pd.DataFrame({"x": [9999999.0, 3.0]}), schema)
    back = decode_codes(codes, schema, np.random.default_rng(0))
    assert back["x"].iloc[0] == 9999999.0
    # with fine decoding's sub-bins too: a point's bin is split like any other, and its draws are the point still
    from privsynth.schema.encoding import sub_edges

    sub = sub_edges(schema.columns[0])
    fine = {"x": {"edges": sub.tolist(), "noisy_counts": np.ones(len(sub) - 1).tolist(), "scale": 0.0}}
    back = decode_codes(np.repeat(codes, 500, axis=0), schema, np.random.default_rng(0), fine=fine)
    assert (back["x"].to_numpy(dtype=float)[:500] == 9999999.0).all()
    assert P.with_points((0.0, 10.0, 20.0), (9.0,), integer=True) == (0.0, 9.0, 10.0, 20.0)


def test_a_quantile_cut_the_point_s_own_mass_placed_beside_it_goes():
    """A balance, 0 for 5% of the customers: the quantile cut at 3.5e-6 bounded an empty bin between the zeros'
    bin and the first real one; a cut of real width beside a point stays, and so does an integer's."""
    assert P.with_points((0.0, 3.5e-6, 34.9, 400.0, 2048.0), (0.0,), integer=False) == (0.0, 5e-10, 34.9, 400.0,
                                                                                          2048.0)
    below = P.with_points((0.0, 10.0, 99.99999, 200.0, 400.0), (100.0,), integer=False)
    assert 99.99999 not in below and 10.0 in below and 100.0 in below
    assert P.with_points((0.0, 3.0, 34.9, 400.0), (0.0,), integer=False) == (0.0, 5e-10, 3.0, 34.9, 400.0)
    assert P.with_points((0.0, 2.0, 34.0, 400.0), (0.0,), integer=True) == (0.0, 1.0, 2.0, 34.0, 400.0)
    # round 2's counts show no data below 100: the empty bins beside the zeros go, the first that holds data stays
    shows = lambda u, v: v > 100.0  # noqa: E731
    assert P.with_points((0.0, 1e-3, 50.0, 150.0, 400.0), (0.0,), integer=False, shows_data=shows) == \
        (0.0, 5e-10, 150.0, 400.0)


@pytest.mark.parametrize("sentinel", [9999999, -1])
def test_a_sentinel_comes_back_exactly_not_smeared(tmp_path, sentinel):
    rng = np.random.default_rng(3)
    n = 20_000
    income = np.round(rng.lognormal(10.5, 0.6, n), 2)
    income[rng.random(n) < 0.05] = sentinel
    text, synthetic = _released(tmp_path, "income", income, rng)
    assert "points written exactly" in text
    column = next(c for c in yaml.safe_load(text)["columns"] if c["name"] == "income")
    assert sentinel in column["bins"]
    assert 0.02 <= (synthetic == sentinel).mean() <= 0.08  # written exactly, at about its share (5%)


def _level(counts, edges=None, sigma=10.0):
    from privsynth.discovery.bounds import Level

    counts = np.asarray(counts, dtype=float)
    edges = np.arange(len(counts) + 1, dtype=float) if edges is None else np.asarray(edges, dtype=float)
    return Level(1, edges, counts, sigma)


def test_a_cell_far_denser_than_its_neighbours_is_a_heap():
    counts = np.full(60, 100.0)
    counts[37] = 2_000.0  # 26% of the rows on one whole number
    assert P.heaps(_level(counts), counts.sum(), 0.0, 60.0, integer=True) == ((37.0, 38.0),)
    # a float grid: the heap is its cell, which fine decoding resolves inside
    spans = P.heaps(_level(counts, np.linspace(0.0, 6.0, 61)), counts.sum(), 0.0, 6.0, integer=False)
    assert len(spans) == 1 and spans[0] == pytest.approx((3.7, 3.8))


def test_a_smooth_column_has_no_heap():
    x = np.arange(200)
    counts = 5_000.0 * np.exp(-0.5 * ((x - 100) / 15.0) ** 2) + 20.0  # a bell: its mode is no heap
    assert P.heaps(_level(counts), counts.sum(), 0.0, 200.0, integer=True) == ()
    skewed = 3_000.0 * np.exp(-x / 10.0)  # a steep fall from its first cell: neighbours on one side only
    assert P.heaps(_level(skewed[:60]), skewed[:60].sum(), 1.0, 60.0, integer=True) == ()


def test_a_heap_needs_its_share_its_ratio_and_its_deviations():
    counts = np.full(60, 100.0)
    counts[20] = 500.0  # 5x its neighbours but 7.8% of the rows: a heap
    assert P.heaps(_level(counts), counts.sum(), 0.0, 60.0, integer=True) == ((20.0, 21.0),)
    counts[20] = 350.0  # 3.5x: under HEAP_RATIO
    assert P.heaps(_level(counts), counts.sum(), 0.0, 60.0, integer=True) == ()
    counts[20] = 500.0
    assert P.heaps(_level(counts, sigma=100.0), counts.sum(), 0.0, 60.0, integer=True) == ()  # 4 deviations
    assert P.heaps(_level(counts), 100_000.0, 0.0, 60.0, integer=True) == ()  # under POINT_SHARE of present
    assert P.heaps(_level(counts), counts.sum(), 30.0, 60.0, integer=True) == ()  # outside the span
    counts[20], counts[59] = 100.0, 2_000.0  # the last cell holds what the grid clips: a tail, not a heap
    assert P.heaps(_level(counts), counts.sum(), 0.0, 60.0, integer=True) == ()


def test_the_fullest_heaps_only():
    counts = np.full(100, 50.0)
    for i, extra in zip((10, 25, 40, 55, 70, 85), (900, 1_000, 1_100, 1_200, 1_300, 1_400)):
        counts[i] += extra
    spans = P.heaps(_level(counts), counts.sum(), 0.0, 100.0, integer=True)
    assert [s[0] for s in spans] == [40.0, 55.0, 70.0, 85.0] and len(spans) == P.MAX_HEAPS


def test_a_span_is_a_bin_of_its_own():
    assert P.with_spans((0.0, 10.0, 20.0, 30.0), ((9.0, 12.0),)) == (0.0, 9.0, 12.0, 20.0, 30.0)
    assert P.with_spans((0.0, 10.0), ((10.0, 11.0),)) == (0.0, 10.0)  # outside the outer edges: not a bin
    assert P.with_points((0.0, 10.0, 20.0), (9.0,), integer=True) == P.with_spans((0.0, 10.0, 20.0), ((9.0, 10.0),))


def test_a_heap_at_no_round_value_comes_back_as_itself(tmp_path):
    rng = np.random.default_rng(4)
    n = 20_000
    term = rng.integers(1, 400, n)
    term[rng.random(n) < 0.12] = 37  # a default many rows keep: no public candidate
    text, synthetic = _released(tmp_path, "term", term, rng)
    assert "heaps round 2 showed ([37, 38))" in text
    column = next(c for c in yaml.safe_load(text)["columns"] if c["name"] == "term")
    assert 37 in column["bins"] and 38 in column["bins"]
    assert 0.09 <= (synthetic == 37).mean() <= 0.15  # about its share (12.2%), not smeared over a quantile bin


def test_a_heap_wider_than_a_value_is_narrowed_on_a_grid_of_its_own():
    rng = np.random.default_rng(0)
    band = np.round(rng.uniform(2091.12, 2091.69, 16_000), 2)
    values, counts = np.unique(np.r_[band, rng.uniform(2080.0, 2104.0, 400), 2104.0], return_counts=True)
    assert P.needs_zoom(((2080.0, 2104.0),), integer=False) and not P.needs_zoom(((37.0, 38.0),), integer=True)
    (narrowed,) = P.narrowed_heaps(values, counts, ((2080.0, 2104.0),), rho=1.0, noise=NoNoise(), integer=False)
    step = 24.0 / P.HEAP_ZOOM_CELLS
    assert narrowed[0] <= 2091.12 and narrowed[1] >= 2091.69 and narrowed[1] - narrowed[0] <= 0.57 + 2 * step
    # an integer heap of a few values: one cell per value; a heap with no passing cell keeps its span
    values, counts = np.array([10.0, 11.0, 12.0, 13.0]), np.array([5.0, 900.0, 800.0, 5.0])
    assert P.narrowed_heaps(values, counts, ((8.0, 16.0), (40.0, 48.0)), rho=1.0, noise=NoNoise(), integer=True) \
        == ((11.0, 13.0), (40.0, 48.0))
    # an integer heap of many values: its grid's cells are not whole, its narrowed span is
    values, counts = np.array([1_000.0, 5_017.0, 5_018.0, 9_000.0]), np.array([2.0, 900.0, 800.0, 2.0])
    ((start, end),) = P.narrowed_heaps(values, counts, ((0.0, 10_000.0),), rho=1.0, noise=NoNoise(), integer=True)
    assert start == int(start) and end == int(end) and start <= 5_017.0 < 5_019.0 <= end <= start + 200


def test_the_heap_grids_count_each_row_once():
    class Recording(NoNoise):
        def add_gaussian(self, x, sigma, *, sensitivity=None):
            self.seen = np.asarray(x, dtype=float)
            return self.seen

    noise = Recording()
    values, counts = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 40.0])
    P.narrowed_heaps(values, counts, ((1.0, 2.0), (2.0, 4.0)), rho=1.0, noise=noise, integer=False)
    assert noise.seen.sum() == 60.0  # 2.0 in the second span only, 4.0 in neither: half-open, disjoint


def test_a_narrow_band_comes_back_in_its_band(tmp_path):
    rng = np.random.default_rng(6)
    n = 30_000
    amount = np.round(rng.uniform(600.0, 1400.0, n), 2)
    band = rng.random(n) < 0.15
    amount[band] = np.round(rng.uniform(1314.27, 1314.8, band.sum()), 2)  # no value held by 2%: no point
    text, synthetic = _released(tmp_path, "amount", amount, rng)
    assert "heaps round 2 showed" in text
    assert 0.12 <= synthetic.between(1314.1, 1314.9).mean() <= 0.19  # in its band, not smeared over its cell


def test_measuring_a_heap_again_spends_round_two_s_rho_no_more():
    """Round 2's three parts: the first grid, the heaps' own grids, the first grid again (averaged). Each Gaussian
    histogram has L2 sensitivity 1, so its rho is 1 / (2 sigma^2); they add to the rho given."""
    from privsynth.discovery import zoom as Z
    from privsynth.discovery.bounds import Bounds, fine_edges

    class Metered(NoNoise):
        rho = 0.0

        def add_gaussian(self, x, sigma, *, sensitivity=None):
            assert sensitivity == 1.0
            self.rho += 1.0 / (2.0 * sigma ** 2)
            return np.asarray(x, dtype=float)

    rng = np.random.default_rng(1)
    x = np.r_[np.round(rng.uniform(600.0, 1400.0, 25_000), 2), np.round(rng.uniform(1314.27, 1314.8, 5_000), 2)]
    values, counts = np.unique(x, return_counts=True)
    noise = Metered()
    bounds = Bounds(512.0, 2048.0, (512.0, 2048.0))
    _, fine = Z.measure_and_read(values, counts.astype(float), fine_edges(512.0, 2048.0, False), 0.03, noise, bounds,
                                 integer=False, coded=False, bins=8, public=False, numeric=True)
    assert fine.heaps is not None and any(a <= 1314.27 and 1314.8 <= b and b - a < 1.0 for a, b in fine.heaps)
    assert noise.rho == pytest.approx(0.03, rel=1e-12)


def test_an_integer_heap_narrowed_to_one_value_keeps_its_narrowing():
    """An integer range past FINE_INTEGER_CELLS (round 2's cells 64 values wide): the heap's cell is measured again,
    one cell per value, and narrows to the one value the rows hold; the read-out carries that span, not the first
    grid's cell."""
    from privsynth.discovery import zoom as Z
    from privsynth.discovery.bounds import Bounds, fine_edges

    rng = np.random.default_rng(2)
    x = np.r_[rng.integers(0, 8_000, 40_000), np.full(6_000, 4_321)]
    values, counts = np.unique(x.astype(float), return_counts=True)
    bounds = Bounds(0.0, 8_192.0, (0.0, 8_192.0))
    _, fine = Z.measure_and_read(values, counts.astype(float), fine_edges(0.0, 8_192.0, True), 3.0, NoNoise(),
                                 bounds, integer=True, coded=True, bins=8, public=False, numeric=True)
    assert fine.heaps == ((4_321.0, 4_322.0),)


def test_a_value_most_rows_hold_keeps_its_own_bin_when_round_two_zooms():
    """A test result capped at 45.00 for 94% of a column, the rest spread over 16-45 with two decimals, at the rho
    a 17-column table gives one column: round 2's first grid passes only the cells near 45, so it zooms there. The
    heap used to be read off the first grid alone, a cell 0.375 wide, and decoding wrote 45.01 for nearly half of
    the rows; the zoomed grid's cells narrow it to a bin that holds 45.00 alone."""
    from privsynth.discovery.column_release import round_one_bounds, round_two_edges
    from privsynth.discovery.declared import DeclaredColumn
    from privsynth.discovery.draft import ColumnDraft

    rng = np.random.default_rng(11)
    x = np.r_[np.full(14_400, 45.0), np.round(rng.uniform(16.0, 45.0, 900), 2)]
    values, counts = np.unique(x, return_counts=True)
    for seed in range(8):
        d = ColumnDraft(DeclaredColumn("ct_value", "float", "DOUBLE", True), {"precision": 2}, [])
        noise = SeededDraws(seed)
        found = round_one_bounds(d, values, counts, 3e-5, noise)
        round_two_edges(d, values, counts, 3e-5, found, 15, noise, public=False)
        edges = np.asarray(d.entry["bins"], dtype=float)
        i = int(np.searchsorted(edges, 45.0, side="right")) - 1
        assert edges[i] > 44.99 and edges[i + 1] <= 45.01, (seed, edges[max(i - 1, 0):i + 3])
