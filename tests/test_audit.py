"""Tests for the accuracy audit (privsynth.audit)."""

from __future__ import annotations

import numpy as np
import pytest

from privsynth.audit import marginal_error_summary
from privsynth.encoding import Domain


def _random_codes(domain: Domain, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, s, n) for s in domain.sizes]).astype(np.int32)


def test_identical_data_has_zero_error():
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    codes = _random_codes(domain, 200, 1)
    summary = marginal_error_summary(codes, codes.copy(), domain)
    assert set(summary) == {"1", "2", "3"}
    for k, stats in summary.items():
        assert stats["mean_tv"] == 0.0 and stats["max_tv"] == 0.0 and stats["max_abs_cell_error"] == 0.0
    assert [summary[k]["n_marginals"] for k in ("1", "2", "3")] == [4, 6, 4]


def test_row_order_and_table_size_do_not_matter():
    domain = Domain(("a", "b", "c"), (3, 2, 4))
    codes = _random_codes(domain, 100, 2)
    doubled = np.concatenate([codes, codes])[::-1]
    summary = marginal_error_summary(codes, doubled, domain)
    assert all(stats["max_tv"] == pytest.approx(0.0, abs=1e-15) for stats in summary.values())


def test_disjoint_data_has_tv_one():
    domain = Domain(("a", "b", "c"), (2, 3, 2))
    real = np.zeros((10, 3), dtype=np.int32)
    synth = np.array([[1, 1, 1], [1, 2, 1]] * 5, dtype=np.int32)
    summary = marginal_error_summary(real, synth, domain)
    for stats in summary.values():
        assert stats["mean_tv"] == pytest.approx(1.0)
        assert stats["max_tv"] == pytest.approx(1.0)
    # 1-way: attribute a is [1,0] vs [0,1] -> cell error 1.
    assert summary["1"]["max_abs_cell_error"] == pytest.approx(1.0)


def test_hand_computed_example():
    # Two binary attributes.
    # real:  (0,0) (0,1) (1,0) (1,1)   -> a = [1/2, 1/2], b = [1/2, 1/2], ab = [1/4]*4
    # synth: (0,0) (0,0) (0,1) (1,1)   -> a = [3/4, 1/4], b = [1/2, 1/2], ab = [1/2, 1/4, 0, 1/4]
    domain = Domain(("a", "b"), (2, 2))
    real = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.int32)
    synth = np.array([[0, 0], [0, 0], [0, 1], [1, 1]], dtype=np.int32)
    summary = marginal_error_summary(real, synth, domain, ks=(1, 2))
    # TV(a) = 0.5 * (1/4 + 1/4) = 1/4, TV(b) = 0 -> mean 1/8, max 1/4; max cell error 1/4.
    assert summary["1"] == {"mean_tv": pytest.approx(0.125), "max_tv": pytest.approx(0.25),
                            "max_abs_cell_error": pytest.approx(0.25), "n_marginals": 2}
    # ab: |1/4-1/2| + 0 + |1/4-0| + 0 = 1/2 -> TV 1/4; max cell error 1/4.
    assert summary["2"] == {"mean_tv": pytest.approx(0.25), "max_tv": pytest.approx(0.25),
                            "max_abs_cell_error": pytest.approx(0.25), "n_marginals": 1}


def test_orders_beyond_attribute_count_are_skipped():
    domain = Domain(("a", "b"), (2, 2))
    codes = _random_codes(domain, 20, 3)
    assert set(marginal_error_summary(codes, codes, domain)) == {"1", "2"}


def test_subset_selection_is_deterministic_and_bounded():
    domain = Domain(tuple(f"x{i}" for i in range(8)), (3,) * 8)
    real = _random_codes(domain, 300, 4)
    synth = _random_codes(domain, 250, 5)
    a = marginal_error_summary(real, synth, domain, max_marginals=10, seed=7)
    b = marginal_error_summary(real, synth, domain, max_marginals=10, seed=7)
    assert a == b
    assert a["1"]["n_marginals"] == 8  # fewer than 10 exist: all of them
    assert a["2"]["n_marginals"] == 10 and a["3"]["n_marginals"] == 10
    full = marginal_error_summary(real, synth, domain)
    assert a["3"]["max_tv"] <= full["3"]["max_tv"] + 1e-12
    c = marginal_error_summary(real, synth, domain, max_marginals=10, seed=8)
    assert c["3"] != a["3"]  # a different seed picks a different subset


def test_rejects_bad_inputs():
    domain = Domain(("a", "b"), (2, 2))
    good = np.zeros((4, 2), dtype=np.int32)
    with pytest.raises(ValueError, match="columns"):
        marginal_error_summary(good[:, :1], good, domain)
    with pytest.raises(ValueError, match="at least one row"):
        marginal_error_summary(good, good[:0], domain)
    with pytest.raises(ValueError, match="outside"):
        marginal_error_summary(good, good + 2, domain)
    with pytest.raises(ValueError, match="max_marginals"):
        marginal_error_summary(good, good, domain, max_marginals=0)
