"""AIM's domain compression: the merge map, its sensitivity, the expansion back to original levels, and
the report and artifacts of a release measured on merged levels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.aim.compression import compress_levels, compressed_one_way, expand_codes
from privsynth.mechanisms.aim.model import NoisyMarginal
from privsynth.mechanisms.rounding import round_release
from privsynth.privacy.noise import SeededNoise
from privsynth.report.dp_report import measurement_fit
from privsynth.run.releases import measurements_from_table, measurements_table
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, marginal_counts, merge_levels


def test_levels_below_the_threshold_merge_into_one_last_level():
    c = compress_levels([np.array([50.0, 2.0, 40.0, -3.0, 1.0]), np.array([5.0, 1.0, 9.0])], [10.0, 10.0])
    np.testing.assert_array_equal(c.groups[0], [0, 2, 1, 2, 2])     # kept 0, 2 in order, then the rare
    np.testing.assert_array_equal(c.groups[1], [0, 0, 0])           # every level rare: one level left
    assert c.sizes == (3, 1)
    # A single rare level has nothing to merge with.
    one = compress_levels([np.array([50.0, 2.0, 40.0])], [10.0])
    assert one.is_identity(0) and one.sizes == (3,)
    never = compress_levels([np.array([50.0, -2.0, -4.0])], [-np.inf])
    assert never.is_identity(0)


def test_an_ordered_scale_merges_only_runs_of_adjacent_rare_bins():
    """A number column's bins (``Domain.ordered``): both tails rare must not become one level; a run of rare
    neighbours is one coarser bin, a lone rare bin keeps its own, and the levels after the scale (missing,
    out-of-domain) merge as any others."""
    counts = np.array([1.0, 2.0, 90.0, 3.0, 80.0, 95.0, 4.0, 0.0, -1.0, 2.0, 1.0])  # 9 bins, missing, ood
    c = compress_levels([counts], [10.0], ordered=(9,))
    np.testing.assert_array_equal(c.groups[0], [0, 0, 1, 2, 3, 4, 5, 5, 5, 6, 6])
    unordered = compress_levels([counts], [10.0])
    np.testing.assert_array_equal(unordered.groups[0], [3, 3, 0, 3, 1, 2, 3, 3, 3, 3, 3])  # the one rare level
    lone = compress_levels([np.array([50.0, 2.0, 40.0, 1.0, 60.0])], [10.0], ordered=(5,))
    assert lone.is_identity(0)
    one_off_scale = compress_levels([np.array([1.0, 2.0, 50.0, 3.0])], [10.0], ordered=(3,))
    np.testing.assert_array_equal(one_off_scale.groups[0], [0, 0, 1, 2])  # a lone rare missing keeps its own


def test_an_ordered_scale_expands_each_run_to_its_own_bins():
    noisy = np.array([30.0, 10.0, 500.0, 900.0, 20.0, 60.0])
    c = compress_levels([noisy], [100.0], ordered=(6,))             # runs {0, 1} and {4, 5} around kept 2, 3
    np.testing.assert_array_equal(c.groups[0], [0, 0, 1, 2, 3, 3])
    compressed = np.repeat(np.array([[0], [1], [2], [3]]), [4000, 100, 100, 8000], axis=0)
    out = expand_codes(compressed, c, [noisy], np.random.default_rng(1))
    low, high = out[:4000, 0], out[4200:, 0]
    assert set(np.unique(low)) == {0, 1} and set(np.unique(high)) == {4, 5}   # a tail never lands in the other
    assert (low == 0).sum() == 3000 and (high == 5).sum() == 6000             # by noisy counts, within one row
    np.testing.assert_array_equal(out[4000:4100, 0], 2)
    np.testing.assert_array_equal(out[4100:4200, 0], 3)


def test_an_ordered_release_keeps_what_each_tail_says_about_another_column():
    """Rare low and high balances with opposite default rates (as credit data): on an ordered domain the release's
    default rate rises from the low tail to the high one; one rare level for both tails makes them alike."""
    rng = np.random.default_rng(3)
    n = 20_000
    balance = rng.choice(10, n, p=[0.003, 0.003] + [0.988 / 6] * 6 + [0.003, 0.003])
    default = (rng.random(n) < np.where(balance >= 8, 0.8, 0.02)).astype(np.int64)
    codes = np.column_stack([balance, default]).astype(np.int32)
    cfg = aim.Config(epsilon=0.3, k=2, iterations_per_round=50, final_iterations=200)

    def tail_gap(dom: Domain, seed: int) -> float:
        noise = SeededNoise(seed, "ordered-tails")
        noise.authorize("test")
        rel = aim.run(aim.collect_statistics(Histogram.of_codes(codes), dom, cfg), dom, cfg, noise)
        out = round_release(rel, dom, n, noise.post_rng)
        return out[out[:, 0] >= 8, 1].mean() - out[out[:, 0] <= 1, 1].mean()

    ordered = np.mean([tail_gap(Domain(("balance", "default"), (10, 2), ordered=(10, 0)), s) for s in range(5)])
    unordered = np.mean([tail_gap(Domain(("balance", "default"), (10, 2)), s) for s in range(5)])
    assert ordered > 0.4 and abs(unordered) < 0.2   # the real gap is 0.78


def test_merged_tables_sum_the_merged_cells():
    c = compress_levels([np.array([9.0, 0.0, 0.0]), np.array([9.0, 9.0])], [5.0, 5.0])
    table = np.arange(6, dtype=float).reshape(3, 2)
    np.testing.assert_array_equal(c.table(table, (0, 1)), [[0, 1], [2 + 4, 3 + 5]])
    np.testing.assert_array_equal(c.table(table.sum(axis=1), (0,)), [1, 5 + 9])
    assert c.published_groups((1,)) == ()
    assert c.published_groups((0, 1)) == ((0, 1, 1), None)


def test_an_empty_structural_level_joins_the_fullest_level_and_is_never_drawn():
    """A ``<missing>`` or ``<out-of-domain>`` level (the last ``structural`` levels) below one deviation of its
    noise joins the fullest level: its noise stays out of that level's count and no record is expanded into it.
    One above the deviation, or a level of the column's own values, is compressed as before."""
    noisy = [np.array([300.0, 5000.0, 4.0, -6.0]),                      # yes, no, missing, out-of-domain
             np.array([2.0, 400.0, 900.0, 30.0, 15.0, 3.0]),            # 4 bins, then missing (held) and ood
             np.array([900.0, 40.0, 20.0])]                             # one category, missing, ood: above
    c = compress_levels(noisy, [50.0, 50.0, 50.0], ordered=(0, 4, 0), structural=(2, 2, 2),
                        deviations=(10.0, 10.0, 10.0))
    np.testing.assert_array_equal(c.groups[0], [0, 1, 1, 1])
    np.testing.assert_array_equal(c.groups[1], [0, 1, 2, 3, 4, 2])     # ood into the fullest bin; missing kept
    np.testing.assert_array_equal(c.groups[2], [0, 1, 1])              # merged as rare levels, not read as empty
    assert c.empty == ((2, 3), (5,), ())
    one_way = compressed_one_way(NoisyMarginal((0,), noisy[0], 10.0), c)
    np.testing.assert_array_equal(one_way.values, [300.0, 5000.0])     # not 5000 + 4 - 6
    np.testing.assert_array_equal(one_way.variance_scale, [1.0, 1.0])
    compressed = np.repeat(np.array([[0, 2, 0], [1, 2, 1], [1, 4, 1]]), [100, 5000, 50], axis=0)
    out = expand_codes(compressed, c, noisy, np.random.default_rng(0))
    assert not np.isin(out[:, 0], (2, 3)).any() and not (out[:, 1] == 5).any()
    assert (out[:, 0] == 1).sum() == 5050 and (out[:, 1] == 4).sum() == 50
    # Every structural level reading empty, with no other level: nothing to join.
    alone = compress_levels([np.array([1.0, -2.0])], [50.0], structural=(2,), deviations=(10.0,))
    assert alone.empty == () and alone.sizes == (1,)


def test_regrouping_keeps_only_empty_levels_that_share_a_group_with_a_counted_one():
    c = compress_levels([np.array([300.0, 5000.0, 4.0, -6.0])], [50.0], structural=(2,), deviations=(10.0,))
    split = c.regrouped([np.array([0, 1, 2, 2])])        # as zeros.keep_levels may split unlike levels apart
    assert split.empty == ()
    assert c.regrouped([np.array([0, 1, 1, 2])]).empty == ((2,),)


@pytest.mark.parametrize("ordered", [(), (3, 3, 0)])
def test_one_record_moves_a_merged_marginal_by_one_cell(ordered):
    """Sensitivity of a measurement on merged levels: neighbouring tables (one record added) give
    merged count tables whose difference has L1 = L2^2 = 1, for every record (an ordered scale's runs, and a
    structural level read as empty, joined to the fullest level, too)."""
    dom = Domain(("a", "b", "c"), (4, 3, 2))
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, s, 200) for s in dom.sizes]).astype(np.int32)
    c = compress_levels([np.array([100.0, 1.0, 2.0, 3.0]), np.array([1.0, 0.0, 99.0]), np.array([5.0, 5.0])],
                        [10.0, 10.0, 10.0], ordered, structural=(1, 0, 0), deviations=(5.0, 5.0, 5.0))
    assert c.empty_levels(0) == (3,) and c.groups[0][3] == c.groups[0][0] and c.sizes[0] == 2
    marginal = (0, 1)
    shape = [dom.sizes[a] for a in marginal]
    base = c.table(marginal_counts(codes, dom, marginal).reshape(shape), marginal)
    for record in itertools.product(*(range(s) for s in dom.sizes)):
        bigger = np.vstack([codes, np.array(record, dtype=np.int32)])
        diff = c.table(marginal_counts(bigger, dom, marginal).reshape(shape), marginal) - base
        assert np.abs(diff).sum() == 1 and (diff**2).sum() == 1


def test_the_merged_one_way_carries_the_summed_variance():
    m = NoisyMarginal((0,), np.array([50.0, 2.0, 40.0, -3.0]), 4.0)
    c = compress_levels([m.values], [10.0])
    merged = compressed_one_way(m, c)
    np.testing.assert_array_equal(merged.values, [50.0, 40.0, -1.0])
    np.testing.assert_array_equal(merged.variance_scale, [1.0, 1.0, 2.0])
    assert merged.total_variance() == pytest.approx(16.0 * 4)
    assert m.total_variance() == pytest.approx(16.0 * 4)


def test_expansion_keeps_kept_levels_and_draws_rare_ones_by_their_noisy_counts():
    noisy = np.array([500.0, 30.0, 900.0, 10.0, -5.0])
    c = compress_levels([noisy], [100.0])                      # levels 1, 3, 4 merge into group 2
    compressed = np.repeat(np.array([[0], [1], [2]]), [1000, 1000, 40000], axis=0)
    out = expand_codes(compressed, c, [noisy], np.random.default_rng(0))
    np.testing.assert_array_equal(out[:1000, 0], 0)
    np.testing.assert_array_equal(out[1000:2000, 0], 2)
    rare = out[2000:, 0]
    assert set(np.unique(rare)) == {1, 3}                      # never the level with a negative count
    assert np.mean(rare == 1) == pytest.approx(0.75, abs=0.01)
    assert abs(int((rare == 1).sum()) - 0.75 * rare.size) < 1.0  # systematic resampling: to within one row


def _skewed_data(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, Domain]:
    """A 12-level attribute where 9 levels are rare, tied to a second attribute."""
    rng = np.random.default_rng(seed)
    dom = Domain(("country", "lang", "x"), (12, 3, 2))
    country = np.where(rng.random(n) < 0.9, rng.integers(0, 3, n), rng.integers(3, 12, n))
    lang = np.where(country < 3, country, 2)
    x = rng.integers(0, 2, n)
    return np.column_stack([country, lang, x]).astype(np.int32), dom


def test_a_compressed_release_is_in_original_levels_and_its_report_reads_merged_measurements():
    codes, dom = _skewed_data()
    cfg = aim.Config(epsilon=0.5, k=2, compress_threshold=3.0, iterations_per_round=30, final_iterations=100)
    noise = SeededNoise(0, "test-key")
    noise.authorize("test")
    rel = aim.run(aim.collect_statistics(Histogram.of_codes(codes), dom, cfg), dom, cfg, noise)
    rel.check_domain(dom)
    assert rel.public_facts["compressed_levels"]["country"] < 12
    merged = [m for m in rel.measurements if m.level_groups]
    assert merged, "the rounds after the 1-way start measure on merged levels"
    for m in rel.measurements[:dom.n_attributes]:
        assert not m.level_groups and m.noisy_counts.size == dom.sizes[m.attributes[0]]
    for m in merged:
        sizes = [dom.sizes[a] if g is None else max(g) + 1 for a, g in zip(m.attributes, m.level_groups)]
        assert m.noisy_counts.size == int(np.prod(sizes))
    # The artifact round trip keeps the groups, and the report compares like with like.
    again = measurements_from_table(measurements_table(rel.measurements))
    assert [m.level_groups for m in again] == [m.level_groups for m in rel.measurements]
    fits = measurement_fit(again, codes, dom)
    for m, fit in zip(again, fits):
        assert fit["cells"] == m.noisy_counts.size
        assert 0.0 <= fit["tv_to_measurement"] <= 1.0


def test_merge_levels_is_the_identity_without_groups():
    table = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(merge_levels(table, [None, None]), table)
    np.testing.assert_array_equal(merge_levels(table, [None, np.array([0, 0, 1, 1])]),
                                  [[1, 5], [9, 13], [17, 21]])
