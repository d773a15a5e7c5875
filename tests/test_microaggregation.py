"""Tests of the covariance-loss microaggregation mechanism (spec covariance_loss.md, section 6 oracle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import StatisticNoise
from pydantic import ValidationError

from privsynth.mechanisms import get_mechanism
from privsynth.mechanisms import microaggregation as M
from privsynth.mechanisms.microaggregation import cells as mm
from privsynth.mechanisms.rounding import round_release
from privsynth.privacy.noise import BudgetNotChargedError, SeededNoise
from privsynth.schema.encoding import Domain, one_hot
from privsynth.schema.workload import Histogram

DOMAIN = Domain(("a", "b", "c", "d"), (3, 4, 2, 5))


def random_codes(n: int, seed: int, domain: Domain = DOMAIN) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Correlated columns so the partition has structure to find.
    base = rng.integers(0, 2, size=n)
    cols = [np.where(rng.uniform(size=n) < 0.7, (base * (s - 1)) % s, rng.integers(0, s, size=n)) for s in domain.sizes]
    return np.column_stack(cols).astype(np.int32)


def noise(seed: int = 0) -> SeededNoise:
    src = SeededNoise(seed, "test-key")
    src.authorize("test")
    return src


class RecordingNoise(SeededNoise):
    """Seeded noise that records the (scale, size) of every Laplace call."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, "test-key")
        self.calls: list[tuple[float, int]] = []
        self.authorize("test")

    def _laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append((scale, size))
        return super()._laplace(scale, size)


def stats_of(codes: np.ndarray, domain: Domain = DOMAIN, batch: int = 37) -> M.MicroaggregationStatistics:
    return M.collect_statistics([codes[i: i + batch] for i in range(0, len(codes), batch)], domain, M.Config())


def exact_partition(codes: np.ndarray, t: int, alpha: float, domain: Domain = DOMAIN):
    g = mm.second_moment_sum(codes, domain)
    basis = mm.top_eigenvectors(g, t)
    lattice = mm.lattice_points(t, alpha)
    cells = mm.assign_cells(mm.project_codes(codes, domain, basis), lattice, alpha)
    return basis, lattice, cells


# ---------------------------------------------------------------- config and accounting

def test_registry_and_contract():
    mod = get_mechanism("microaggregation")
    assert mod is M and M.NAME == "microaggregation"
    cfg = M.Config()
    assert cfg.variant == "dp" and cfg.epsilon == 1.0
    with pytest.raises(ValidationError):
        M.Config(unknown=1)
    with pytest.raises(ValidationError):
        cfg.epsilon = 2.0  # frozen


def test_k_anonymous_is_refused_unless_asked_for_by_name():
    with pytest.raises(ValidationError, match="NOT differentially private.*allow_non_private=True"):
        M.Config(variant="k_anonymous")
    cfg = M.Config(variant="k_anonymous", allow_non_private=True)
    cost = M.privacy_cost(cfg)
    assert not cost.is_dp and math.isinf(cost.rho) and "NOT differentially private" in cost.guarantee
    report = cost.report(1e-9)
    assert report["differentially_private"] is False and "NOT differentially private" in report["guarantee"]


@pytest.mark.parametrize("field,value,word", [
    ("epsilon", 0.0, "epsilon"), ("epsilon", float("nan"), "epsilon"), ("delta", 1.0, "delta"),
    ("t", -1, "t "), ("t", 13, "t "), ("alpha", 0.0, "alpha"), ("alpha", 3.0, "alpha"),
    ("budget_split", (0.5, 0.5, 0.5), "budget_split"), ("budget_split", (0.0, 0.5, 0.5), "budget_split"),
    ("damping", 0, "damping"), ("count_threshold", -1.0, "count_threshold"), ("k_blocks", 0, "k_blocks"),
    ("variant", "other", "variant"), ("centroids", "median", "centroids"),
])
def test_config_validation_names_the_parameter(field, value, word):
    with pytest.raises(ValidationError, match=word):
        M.Config(**{field: value})


def test_config_refuses_huge_lattice():
    with pytest.raises(ValidationError, match="max_cells"):
        M.Config(t=8, alpha=0.2)
    M.Config(t=4, alpha=0.5, max_cells=2000)  # 1281 cells fit


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_privacy_cost_is_pure_epsilon_from_config(eps):
    cfg = M.Config(epsilon=eps, budget_split=(0.1, 0.3, 0.6))
    cost = M.privacy_cost(cfg)
    assert cost.is_dp and cost.pure_epsilon == eps and cost.rho == pytest.approx(eps * eps / 2)
    assert sum(M.budget_shares(cfg)) == pytest.approx(eps)
    assert M.budget_shares(cfg) == pytest.approx((0.1 * eps, 0.3 * eps, 0.6 * eps))
    assert "add/remove" in cost.guarantee
    # t = 0: no PCA, its share goes to weights and centroids in proportion.
    assert M.budget_shares(M.Config(epsilon=eps, t=0, budget_split=(0.1, 0.3, 0.6))) == pytest.approx(
        (0.0, eps / 3, 2 * eps / 3))


# ---------------------------------------------------------------- statistics

def test_statistics_stream_equals_one_batch_and_checks_codes():
    codes = random_codes(300, 1)
    s = stats_of(codes, batch=41)
    x = one_hot(codes, DOMAIN, np.float64) / 2.0  # q = 4
    np.testing.assert_allclose(s.second_moment, x.T @ x, atol=1e-10)
    np.testing.assert_array_equal(s.cooccurrence, 4 * x.T @ x)  # exact integer counts
    # the distinct records and their counts, in canonical (sorted) order, stand for every record
    distinct, counts = np.unique(codes, axis=0, return_counts=True)
    np.testing.assert_array_equal(s.codes, distinct)
    np.testing.assert_array_equal(s.counts, counts)
    np.testing.assert_array_equal(s.records(), np.repeat(distinct, counts, axis=0))
    assert s.codes.dtype == np.uint8 and s.n == 300 and s.codes.shape[0] < 300
    assert "withheld" in repr(s)
    with pytest.raises(ValueError, match="outside the domain"):
        M.collect_statistics([np.array([[0, 4, 0, 0]])], DOMAIN, M.Config())
    with pytest.raises(ValueError, match="outside the domain"):
        M.collect_statistics(Histogram(np.array([[0, 4, 0, 0]]), np.array([2])), DOMAIN, M.Config())


def test_histogram_input_equals_record_batches():
    codes = random_codes(500, 2)
    one = stats_of(codes, batch=53)
    hist = Histogram.of_codes(codes)
    # zero counts and repeated codes in a histogram are harmless: they are merged and dropped
    messy = Histogram(np.vstack([hist.codes, hist.codes[:3], [[2, 3, 1, 4]]]),
                      np.concatenate([hist.counts - np.r_[1, 1, 1, np.zeros(hist.counts.size - 3, int)], [1, 1, 1],
                                      [0]]))
    for data in (hist, messy):
        two = M.collect_statistics(data, DOMAIN, M.Config())
        np.testing.assert_array_equal(one.cooccurrence, two.cooccurrence)
        np.testing.assert_array_equal(one.codes, two.codes)
        np.testing.assert_array_equal(one.counts, two.counts)


def test_weighted_cell_statistics_equal_repeated_records():
    rng = np.random.default_rng(3)
    distinct = np.unique(random_codes(200, 3), axis=0).astype(np.int64)
    weights = rng.integers(1, 6, distinct.shape[0])
    cells = rng.integers(0, 7, distinct.shape[0])
    np.testing.assert_array_equal(mm.cell_counts(cells, 7, weights), mm.cell_counts(np.repeat(cells, weights), 7))
    big = weights.copy()
    big[0] = 10 ** 9  # far beyond any batch: still exact integers
    expected = mm.cell_counts(cells, 7, weights)
    expected[cells[0]] += 10 ** 9 - weights[0]
    np.testing.assert_array_equal(mm.cell_counts(cells, 7, big), expected)
    small = weights
    rec_small = np.repeat(distinct, small, axis=0)
    np.testing.assert_array_equal(mm.cell_sums(distinct, DOMAIN, cells, 7, small),
                                  mm.cell_sums(rec_small, DOMAIN, np.repeat(cells, small), 7))
    np.testing.assert_array_equal(mm.cooccurrence_counts(distinct, DOMAIN, small),
                                  mm.cooccurrence_counts(rec_small, DOMAIN))


def _per_record_dp_release(records, cfg, src):
    """The dp release computed record by record with the plain (unweighted) cell functions."""
    eps_pca, eps_w, eps_c = M.budget_shares(cfg)
    q = DOMAIN.n_attributes
    basis = mm.private_pca_laplace(mm.cooccurrence_counts(records, DOMAIN), DOMAIN, cfg.t, eps_pca, src)
    lattice = mm.lattice_points(cfg.t, cfg.alpha)
    s = lattice.shape[0]
    cells = mm.assign_cells(mm.project_codes(records, DOMAIN, basis), lattice, cfg.alpha)
    counts = mm.cell_counts(cells, s)
    noisy_counts = src.add_laplace(counts, 1.0 / eps_w)
    weights = mm.simplex_l1_projection(mm.threshold_counts(noisy_counts, cfg.count_threshold / eps_w))
    if cfg.centroids == "noisy_sum":
        noisy = src.add_laplace(mm.cell_sums(records, DOMAIN, cells, s), q / eps_c) / np.maximum(noisy_counts,
                                                                                                 cfg.damping)[:, None]
    else:
        b = cfg.damping
        noisy = src.add_laplace(mm.damped_centroids(mm.cell_sums(records, DOMAIN, cells, s), counts, b),
                                mm.centroid_l1_sensitivity(q, b) / eps_c)
    return mm.project_blocks(noisy, DOMAIN), weights


@pytest.mark.parametrize("centroids", ["noisy_sum", "damped_mean"])
def test_dp_release_from_a_histogram_equals_the_per_record_release(centroids):
    records = random_codes(600, 21).astype(np.int64)
    cfg = M.Config(epsilon=2.0, t=2, alpha=0.6, centroids=centroids, damping=3)
    points, weights = _per_record_dp_release(records, cfg, noise(8))
    for data in ([records[i:i + 64] for i in range(0, 600, 64)], Histogram.of_codes(records)):
        rel = M.run(M.collect_statistics(data, DOMAIN, cfg), DOMAIN, cfg, noise(8))
        np.testing.assert_array_equal(rel.points, points)
        np.testing.assert_array_equal(rel.weights, weights)


def test_k_anonymous_release_from_a_histogram_equals_record_batches():
    records = random_codes(400, 22)
    cfg = M.Config(variant="k_anonymous", allow_non_private=True, k_blocks=20, t=2, alpha=0.6)
    a = M.run(stats_of(records), DOMAIN, cfg, noise(0))
    b = M.run(M.collect_statistics(Histogram.of_codes(records), DOMAIN, cfg), DOMAIN, cfg, noise(0))
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_check_config_and_forecast():
    M.check_config(M.Config(), DOMAIN)
    with pytest.raises(ValueError, match="t=12 exceeds the domain's one-hot width 4"):
        M.check_config(M.Config(t=12, alpha=2.0), Domain(("a", "b"), (2, 2)))
    wide = Domain(tuple(f"x{j}" for j in range(40)), (50,) * 40)  # width 2000
    with pytest.raises(ValueError, match="max_memory_gb=4"):
        M.check_config(M.Config(t=7, alpha=0.75), wide)  # 33 659 cells x 2000 columns
    M.check_config(M.Config(t=7, alpha=0.75, max_memory_gb=64), wide)
    M.check_config(M.Config(t=6, alpha=0.75), wide)
    f = M.forecast(M.Config(epsilon=1.0, t=2, alpha=0.6), DOMAIN, n_public=10_000)
    assert f["cells"] == mm.lattice_points(2, 0.6).shape[0] and f["count_noise_scale"] == pytest.approx(5.0)
    assert "Laplace(5)" in f["summary"] and "% of the total mass" in f["summary"]
    assert f["pca_noise_scale"] == pytest.approx(4 * 5 / 2 / 0.2)
    assert not M.forecast(M.Config(variant="k_anonymous", allow_non_private=True), DOMAIN)["differentially_private"]
    assert "Warning" in M.forecast(M.Config(pca="exponential"), DOMAIN)["summary"]
    assert "Warning" not in f["summary"]


# ---------------------------------------------------------------- deterministic oracle (non-private path)

@pytest.mark.parametrize("t,alpha", [(1, 0.5), (2, 0.7), (3, 0.9), (0, 0.5)])
def test_mean_preservation_and_psd_loss(t, alpha):
    codes = random_codes(400, 2)
    x = mm.scaled_one_hot(codes, DOMAIN)
    _, lattice, cells = exact_partition(codes, t, alpha)
    w, y = mm.partition_moments(x, cells, lattice.shape[0])
    np.testing.assert_allclose(w @ y, x.mean(axis=0), atol=1e-12)
    loss = x.T @ x / len(x) - (y * w[:, None]).T @ y
    eig = np.linalg.eigvalsh(loss)
    assert eig.min() > -1e-12
    # ||M||_F <= tr M = k-means cost / n.
    kmeans = np.mean(np.sum((x - y[cells]) ** 2, axis=1))
    assert np.linalg.norm(loss) <= np.trace(loss) + 1e-12 and np.trace(loss) == pytest.approx(kmeans)
    if t == 0:
        assert lattice.shape[0] == 1 and np.allclose(y[0], x.mean(axis=0))


def test_covariance_loss_never_grows_when_cells_are_split():
    rng = np.random.default_rng(3)
    codes = random_codes(500, 3)
    x = mm.scaled_one_hot(codes, DOMAIN)
    _, lattice, cells = exact_partition(codes, 2, 0.8)
    s = lattice.shape[0]
    loss = mm.covariance_loss(x, cells, s)
    for _ in range(20):
        split = rng.integers(0, 3, size=len(x))
        refined = cells * 3 + split
        refined_loss = mm.covariance_loss(x, refined, 3 * s)
        assert refined_loss <= loss + 1e-12
        # Lemma 3.9 (merger): merging everything back costs at most the merged mass (here 1).
        assert loss <= refined_loss + 1.0


def test_lattice_covering_and_cell_radius():
    rng = np.random.default_rng(4)
    for t, alpha in [(1, 0.3), (2, 0.5), (3, 0.6), (4, 0.75)]:
        lattice = mm.lattice_points(t, alpha)
        h = alpha / math.sqrt(t)
        pts = lattice * h
        assert np.all(np.linalg.norm(pts, axis=1) <= 1 + 1e-9)
        assert lattice.shape[0] <= (7 / alpha) ** t and lattice.shape[0] <= mm.lattice_upper_bound(t, alpha)
        assert len({tuple(g) for g in lattice}) == lattice.shape[0]
        z = rng.normal(size=(2000, t))
        z *= (rng.uniform(size=(2000, 1)) ** (1 / t)) / np.linalg.norm(z, axis=1, keepdims=True)
        z[:5] /= np.linalg.norm(z[:5], axis=1, keepdims=True)  # points on the sphere too
        cells = mm.assign_cells(z, lattice, alpha)
        dist = np.linalg.norm(z - pts[cells], axis=1)
        assert dist.max() < alpha  # Lemma 3.6's only requirement
        nearest = np.argmin(np.linalg.norm(z[:, None, :] - pts[None], axis=2), axis=1)
        inside = np.linalg.norm(np.rint(z / h), axis=1) <= math.sqrt(t) / alpha
        np.testing.assert_array_equal(cells[inside], nearest[inside])


def test_spectral_tail_and_lemma_3_2():
    codes = random_codes(400, 5)
    x = mm.scaled_one_hot(codes, DOMAIN)
    s_mat = x.T @ x / len(x)
    for t, alpha in [(1, 0.6), (2, 0.6), (3, 0.8)]:
        basis, lattice, cells = exact_partition(codes, t, alpha)
        proj = basis @ basis.T
        rest = np.eye(DOMAIN.width) - proj
        tail = np.linalg.norm(rest @ s_mat @ rest)
        assert tail <= 1 / math.sqrt(t) + 1e-12
        w, y = mm.partition_moments(x, cells, lattice.shape[0])
        loss = mm.covariance_loss(x, cells, lattice.shape[0])
        within = np.mean(np.sum(((x - y[cells]) @ proj) ** 2, axis=1))
        assert loss <= within + tail + 1e-12
        assert loss <= 4 * alpha ** 2 + tail + 1e-12  # Lemmas 3.2 + 3.6


def test_tensorization_d3():
    codes = random_codes(200, 6)
    x = mm.scaled_one_hot(codes, DOMAIN)[:, :7]
    x /= max(1.0, np.linalg.norm(x, axis=1).max())
    _, lattice, cells = exact_partition(codes, 2, 0.6)
    w, y = mm.partition_moments(x, cells, lattice.shape[0])
    t3 = lambda a, c: np.einsum("i,ij,ik,il->jkl", c, a, a, a)  # noqa: E731
    err3 = np.linalg.norm(t3(x, np.full(len(x), 1 / len(x))) - t3(y, w))
    assert err3 <= 2 ** (3 - 2) * (2 ** 3 - 3 - 1) * mm.covariance_loss(x, cells, lattice.shape[0]) + 1e-12


# ---------------------------------------------------------------- k-anonymous equipartition

@pytest.mark.parametrize("n,k", [(400, 20), (400, 16), (403, 20), (50, 50), (10, 4)])
def test_equipartition_block_sizes(n, k):
    codes = random_codes(n, 7)
    _, _, cells = exact_partition(codes, 2, 0.6)
    labels = mm.equipartition(cells, k)
    sizes = np.bincount(labels, minlength=k)
    r = n // k
    assert sizes.sum() == n and labels.min() == 0 and labels.max() == k - 1
    assert np.all(sizes[:-1] == r) and sizes[-1] == r + n % k
    np.testing.assert_array_equal(labels, mm.equipartition(cells, k))  # deterministic
    if n % k == 0:
        # Every block is a chunk of one cell, or a chunk of the merged residue R (the records left over
        # after cutting each cell, in index order, into chunks of r).
        residue = np.zeros(n, dtype=bool)
        for c in np.unique(cells):
            idx = np.flatnonzero(cells == c)
            residue[idx[(len(idx) // r) * r:]] = True
        for j in range(k):
            members = labels == j
            assert len(np.unique(cells[members])) == 1 or np.all(residue[members])
            assert np.all(residue[members]) or not np.any(residue[members])


def test_k_anonymous_release_means_are_exact():
    codes = random_codes(480, 8)
    cfg = M.Config(variant="k_anonymous", allow_non_private=True, k_blocks=24, t=2, alpha=0.6)
    rel = M.run(stats_of(codes), DOMAIN, cfg, noise())
    rel.check_domain(DOMAIN)
    assert rel.points.shape == (24, DOMAIN.width)
    np.testing.assert_allclose(rel.weights, np.full(24, 1 / 24))
    np.testing.assert_allclose(rel.weights @ rel.points, one_hot(codes, DOMAIN, np.float64).mean(axis=0), atol=1e-12)
    assert rel.public_facts["differentially_private"] is False
    rows = round_release(rel, DOMAIN, 100, np.random.default_rng(0))
    assert rows.shape == (100, 4)


# ---------------------------------------------------------------- DP path: sensitivity on neighbouring datasets

def test_sensitivities_on_add_remove_neighbours():
    rng = np.random.default_rng(9)
    q = DOMAIN.n_attributes
    mask = mm.second_moment_mask(DOMAIN)
    for trial in range(30):
        codes = random_codes(int(rng.integers(5, 80)), 100 + trial)
        extra = random_codes(1, 200 + trial)
        both = np.vstack([codes, extra])
        g, g2 = mm.second_moment_sum(codes, DOMAIN), mm.second_moment_sum(both, DOMAIN)
        diff = g2 - g
        assert np.abs(diff[mask]).sum() == pytest.approx(mm.second_moment_l1_sensitivity(q))
        assert np.allclose(diff[~mask & ~np.tril(np.ones_like(mask), -1).astype(bool)], 0)  # structural zeros
        assert np.linalg.eigvalsh(diff).min() > -1e-12 and np.linalg.norm(diff, 2) <= 1 + 1e-12  # monotone score
        # A fixed (released) basis: the other records keep their cells; one count moves by 1.
        basis = np.linalg.qr(rng.normal(size=(DOMAIN.width, 2)))[0]
        lattice = mm.lattice_points(2, 0.5)
        s = lattice.shape[0]
        c1 = mm.assign_cells(mm.project_codes(codes, DOMAIN, basis), lattice, 0.5)
        c2 = mm.assign_cells(mm.project_codes(both, DOMAIN, basis), lattice, 0.5)
        np.testing.assert_array_equal(c1, c2[:-1])
        n1, n2 = mm.cell_counts(c1, s), mm.cell_counts(c2, s)
        assert np.abs(n2 - n1).sum() == 1
        s1, s2 = mm.cell_sums(codes, DOMAIN, c1, s), mm.cell_sums(both, DOMAIN, c2, s)
        assert np.abs(s2 - s1).sum() == pytest.approx(mm.sum_l1_sensitivity(q))
        cell = c2[-1]
        for b in {1, 2, int(n1[cell]), int(n1[cell]) + 1, int(n1[cell]) + 2, 7}:
            b = max(b, 1)
            d = np.abs(mm.damped_centroids(s2, n2, b) - mm.damped_centroids(s1, n1, b)).sum()
            assert d <= mm.centroid_l1_sensitivity(q, b) + 1e-12


def test_damped_centroid_bound_is_attained():
    # A cell of b identical records, then a record that differs in every attribute: L1 change 2q/(b+1).
    b = 5
    codes = np.zeros((b, 4), dtype=np.int64)
    extra = np.array([[1, 1, 1, 1]])
    cells1, cells2 = np.zeros(b, dtype=np.int64), np.zeros(b + 1, dtype=np.int64)
    s1 = mm.cell_sums(codes, DOMAIN, cells1, 1)
    s2 = mm.cell_sums(np.vstack([codes, extra]), DOMAIN, cells2, 1)
    d = np.abs(mm.damped_centroids(s2, np.array([b + 1.0]), b) - mm.damped_centroids(s1, np.array([float(b)]), b)).sum()
    assert d == pytest.approx(mm.centroid_l1_sensitivity(4, b))


def test_noise_scales_match_the_accounting():
    codes = random_codes(300, 10)
    q = DOMAIN.n_attributes
    for centroids in ("noisy_sum", "damped_mean"):
        cfg = M.Config(epsilon=2.0, t=2, alpha=0.6, budget_split=(0.25, 0.25, 0.5), centroids=centroids, damping=6)
        src = RecordingNoise(1)
        rel = M.run(stats_of(codes), DOMAIN, cfg, src)
        s = mm.lattice_points(2, 0.6).shape[0]
        free = int(mm.second_moment_mask(DOMAIN).sum())
        centroid = q / 1.0 if centroids == "noisy_sum" else 2 * q / (7 * 1.0)
        assert src.calls == [  # PCA noise on the integer co-occurrence counts C = q G: scale q(q+1)/2 / eps_pca
            pytest.approx((q * (q + 1) / 2 / 0.5, free)), pytest.approx((1 / 0.5, s)),
            pytest.approx((centroid, s * DOMAIN.width))]
        assert rel.public_facts["centroid_noise_scale"] == pytest.approx(centroid)




@pytest.mark.parametrize("centroids", ["noisy_sum", "damped_mean"])
def test_every_noise_is_added_to_its_statistic_by_the_measurement(centroids):
    cfg = M.Config(epsilon=2.0, t=2, alpha=0.6, budget_split=(0.25, 0.25, 0.5), centroids=centroids, damping=6)
    src = StatisticNoise(2)
    M.run(stats_of(random_codes(200, 23)), DOMAIN, cfg, src)
    s = mm.lattice_points(2, 0.6).shape[0]
    free = int(mm.second_moment_mask(DOMAIN).sum())
    assert [shape for shape, _ in src.added] == [(free,), (s,), (s, DOMAIN.width)]


def test_dp_release_refuses_unauthorised_noise():
    with pytest.raises(BudgetNotChargedError):
        M.run(stats_of(random_codes(50, 11)), DOMAIN, M.Config(t=2, alpha=0.6), SeededNoise(0, "test-key"))


# ---------------------------------------------------------------- DP path: projections and the release

def test_simplex_projections():
    rng = np.random.default_rng(12)
    v = rng.normal(size=(200, 6)) * 2
    p = mm.project_rows_to_simplex(v)
    assert np.all(p >= 0) and np.allclose(p.sum(axis=1), 1)
    # Euclidean optimality: <v - p, u - p> <= 0 for every simplex vertex u.
    for u in np.eye(6):
        assert np.all(np.sum((v - p) * (u - p), axis=1) <= 1e-9)
    np.testing.assert_allclose(mm.project_rows_to_simplex(np.array([[0.2, 0.3, 0.5]])), [[0.2, 0.3, 0.5]])
    w = np.array([3.0, -1.0, 1.0, 0.0])
    np.testing.assert_allclose(mm.simplex_l1_projection(w), [0.75, 0, 0.25, 0])
    np.testing.assert_allclose(mm.simplex_l1_projection(-np.ones(4)), np.full(4, 0.25))
    np.testing.assert_allclose(mm.threshold_counts(np.array([5.0, 2.0, -1.0]), 2.0), [5.0, 0.0, 0.0])


@pytest.mark.parametrize("centroids", ["noisy_sum", "damped_mean"])
def test_dp_release_shape_is_data_independent_and_valid(centroids):
    cfg = M.Config(epsilon=1.0, t=2, alpha=0.6, centroids=centroids)
    s = mm.lattice_points(2, 0.6).shape[0]
    for n, seed in [(40, 13), (400, 14), (0, 15)]:
        stats = stats_of(random_codes(n, seed)) if n else M.collect_statistics([], DOMAIN, cfg)
        rel = M.run(stats, DOMAIN, cfg, noise(seed))
        rel.check_domain(DOMAIN)
        assert rel.points.shape == (s, DOMAIN.width) and not rel.exact
        assert rel.weights.sum() == pytest.approx(1) and np.all(rel.weights >= 0)
        assert set(rel.public_facts) >= {"cells", "damping", "epsilon_pca", "centroid_noise_scale"}
        rows = round_release(rel, DOMAIN, 50, np.random.default_rng(0))
        assert rows.shape == (50, 4) and np.all(rows < np.asarray(DOMAIN.sizes))


def test_seeded_run_is_reproducible():
    stats = stats_of(random_codes(300, 16))
    cfg = M.Config(t=3, alpha=0.8)
    a, b, c = (M.run(stats, DOMAIN, cfg, noise(s)) for s in (5, 5, 6))
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert not np.array_equal(a.points, c.points)


def test_dp_release_tracks_the_data_at_large_epsilon():
    codes = random_codes(3000, 17)
    cfg = M.Config(epsilon=200.0, t=2, alpha=0.6)
    rel = M.run(stats_of(codes), DOMAIN, cfg, noise(1))
    truth = one_hot(codes, DOMAIN, np.float64).mean(axis=0)
    assert np.abs(rel.weights @ rel.points - truth).max() < 0.02


# ---------------------------------------------------------------- exponential-mechanism PCA (paper's PROJ)

def _circle_density(g: np.ndarray, beta: float, theta: np.ndarray) -> np.ndarray:
    v = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    log = beta * np.einsum("ij,jk,ik->i", v, g, v)
    dens = np.exp(log - log.max())
    return dens / (dens.sum() * (theta[1] - theta[0]))


def test_exponential_mechanism_density_ratio_on_the_circle():
    # Add/remove neighbours: G' = G + x x^T with ||x|| <= 1; the density ratio must stay within e^{+-beta}.
    rng = np.random.default_rng(18)
    theta = np.linspace(0, 2 * np.pi, 20001)[:-1]
    beta = 0.7
    worst = 0.0
    for _ in range(50):
        pts = rng.normal(size=(int(rng.integers(1, 30)), 2))
        pts /= np.maximum(1, np.linalg.norm(pts, axis=1, keepdims=True))
        x = rng.normal(size=2)
        x /= np.linalg.norm(x)
        g = pts.T @ pts
        ratio = np.log(_circle_density(g + np.outer(x, x), beta, theta) / _circle_density(g, beta, theta))
        worst = max(worst, np.abs(ratio).max())
    assert worst <= beta + 1e-9
    assert worst > 0.5 * beta  # the bound is nearly attained: the factor is not loose


def test_bingham_sampler_matches_the_density():
    g = np.diag([3.0, 1.0, 0.0])
    src = noise(19)
    draws = np.array([mm.sample_bingham(g, src) for _ in range(3000)])
    assert np.allclose(np.linalg.norm(draws, axis=1), 1)
    # E[v_1^2] by numerical integration over the sphere.
    rng = np.random.default_rng(0)
    u = rng.normal(size=(400_000, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    wts = np.exp(np.einsum("ij,jk,ik->i", u, g, u))
    expected = np.sum(wts * u[:, 0] ** 2) / wts.sum()
    assert np.mean(draws[:, 0] ** 2) == pytest.approx(expected, abs=0.03)


def test_exponential_pca_gives_an_orthonormal_basis():
    codes = random_codes(200, 20)
    g = mm.second_moment_sum(codes, DOMAIN)
    basis = mm.private_pca_exponential(g, 3, 1.0, noise(4))
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-10)
    proj = basis @ basis.T
    assert np.allclose(proj, proj.T) and np.allclose(proj @ proj, proj, atol=1e-10)
    rel = M.run(stats_of(codes), DOMAIN, M.Config(pca="exponential", epsilon=1.0, t=2, alpha=0.6), noise(5))
    rel.check_domain(DOMAIN)
