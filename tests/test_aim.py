"""AIM: accounting against hand-computed values, the calls actually made to the noise source, score
sensitivity on neighbouring tables, candidate weights, config checks, the graphical model (exact
inference against brute force, estimation, sampling), and end-to-end releases."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from privsynth.mechanisms import get_mechanism
from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.aim.model import (
    GraphicalModel,
    NoisyMarginal,
    downward_closure,
    maximal_subsets,
    model_size_mb,
)
from privsynth.mechanisms.base import Measurement
from privsynth.mechanisms.rounding import round_release
from privsynth.privacy.accounting import exponential_rho, gaussian_rho
from privsynth.privacy.noise import SeededNoise
from privsynth.privacy.spending import rho_allowance
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, marginal_counts

ROOT = Path(__file__).resolve().parent.parent


class SpyNoise(SeededNoise):
    """Seeded noise that records every privacy call."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, "test-key")
        self.gaussian_calls: list[tuple[float, int]] = []
        self.max_calls: list[tuple[float, int]] = []

    def _gaussian(self, scale: float, size: int) -> np.ndarray:
        self.gaussian_calls.append((scale, size))
        return super()._gaussian(scale, size)

    def _noisy_max(self, scores: np.ndarray, scale: float) -> int:
        self.max_calls.append((scale, scores.size))
        return super()._noisy_max(scores, scale)


def toy_data(seed: int = 0, n: int = 4000) -> tuple[np.ndarray, Domain]:
    """A chain a -> b -> c -> d with a fifth, independent attribute."""
    rng = np.random.default_rng(seed)
    dom = Domain(("a", "b", "c", "d", "e"), (3, 4, 2, 3, 2))
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = (b > 1).astype(int) ^ (rng.random(n) < 0.1)
    d = (c + a + rng.integers(0, 2, n)) % 3
    e = rng.integers(0, 2, n)
    return np.column_stack([a, b, c, d, e]).astype(np.int32), dom


def run_toy(config: aim.Config, noise: SeededNoise, seed: int = 0):
    codes, dom = toy_data(seed)
    stats = aim.collect_statistics(Histogram.of_codes(codes), dom, config)
    noise.authorize("test")
    return codes, dom, aim.run(stats, dom, config, noise)


FAST = dict(iterations_per_round=30, final_iterations=100)


# ---------------------------------------------------------------- accounting

@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_rho_is_the_tight_allowance_and_reports_the_requested_epsilon(eps):
    cfg = aim.Config(epsilon=eps, delta=1e-9)
    cost = aim.privacy_cost(cfg)
    assert cost.rho == rho_allowance(eps, 1e-9)
    assert cost.epsilon_at(1e-9) == pytest.approx(eps, rel=1e-6)
    assert cost.epsilon_at(1e-9) <= eps * (1 + 1e-9)


def test_unit_costs_hand_computed():
    assert gaussian_rho(2.0) == 0.125            # 1 / (2 * 2^2)
    assert gaussian_rho(10.0) == 0.005
    assert exponential_rho(0.4) == pytest.approx(0.02, rel=1e-15)   # 0.4^2 / 8
    assert exponential_rho(2.0) == 0.5


def test_initial_round_budget_hand_computed():
    dom = Domain(("a", "b", "c", "d"), (2, 2, 2, 2))
    cfg = aim.Config(epsilon=1.0, delta=1e-9)
    rho = rho_allowance(1.0, 1e-9)
    t = 4 * 4  # T = 4 d (schedule.ROUNDS_PER_ATTRIBUTE)
    assert aim.initial_sigma(cfg, dom.n_attributes) == pytest.approx(math.sqrt(t / (2 * 0.9 * rho)), rel=1e-15)
    assert aim.initial_epsilon(cfg, dom.n_attributes) == pytest.approx(math.sqrt(8 * 0.1 * rho / t), rel=1e-15)
    # One round: 0.1 of its rho selects, 0.9 measures, together rho / T.
    sigma, eps = aim.initial_sigma(cfg, 4), aim.initial_epsilon(cfg, 4)
    assert exponential_rho(eps) + gaussian_rho(sigma) == pytest.approx(rho / t, rel=1e-12)
    assert aim.initial_sigma(aim.Config(epsilon=1.0, max_rounds=10), 4) == pytest.approx(math.sqrt(10 / (1.8 * rho)))


def test_start_sigmas_hand_computed():
    """sigma_a = sigma_0 sqrt(mean_b K_b^(2/3)) / K_a^(1/3): levels 2 and 16 give K^(1/3) = 2^(1/3) and
    2^(4/3), mean K^(2/3) = (2^(2/3) + 2^(8/3)) / 2; the start's rho is that of d measurements at sigma_0."""
    cfg = aim.Config(epsilon=1.0, delta=1e-9)
    sigma_0 = aim.initial_sigma(cfg, 2)
    scale = math.sqrt((2 ** (2 / 3) + 2 ** (8 / 3)) / 2)
    assert aim.start_sigmas(cfg, (2, 16)) == pytest.approx((sigma_0 * scale / 2 ** (1 / 3),
                                                             sigma_0 * scale / 2 ** (4 / 3)), rel=1e-14)
    assert aim.start_sigmas(cfg, (2, 16))[0] == pytest.approx(1.5811 * sigma_0, rel=1e-4)
    for sizes in ((2, 16), (5, 5, 5), (2, 3, 42, 7, 9)):
        sigmas = aim.start_sigmas(cfg, sizes)
        assert math.fsum(gaussian_rho(s) for s in sigmas) == pytest.approx(
            len(sizes) * gaussian_rho(aim.initial_sigma(cfg, len(sizes))), rel=1e-12)
    assert aim.start_sigmas(cfg, (5, 5, 5)) == pytest.approx((aim.initial_sigma(cfg, 3),) * 3, rel=1e-14)


def test_start_sigmas_minimise_the_expected_one_way_error_at_their_rho():
    """The start's expected L1 error is about sqrt(2/pi) sum_a K_a sigma_a: the split beats one sigma for all
    and every other power of K at the same total rho."""
    cfg = aim.Config(epsilon=1.0, delta=1e-9)
    sizes = (2, 2, 3, 20, 22, 12, 6)
    total = len(sizes) * gaussian_rho(aim.initial_sigma(cfg, len(sizes)))

    def expected_l1(sigmas):
        return math.fsum(k * s for k, s in zip(sizes, sigmas))

    def split_by_power(power):
        weights = [k ** power for k in sizes]
        scale = math.sqrt(math.fsum(w * w for w in weights) / (2 * total))   # sum 1 / (2 sigma^2) = total
        return [scale / w for w in weights]

    chosen = aim.start_sigmas(cfg, sizes)
    assert split_by_power(1 / 3) == pytest.approx(list(chosen), rel=1e-12)
    assert expected_l1(chosen) < 0.95 * expected_l1([aim.initial_sigma(cfg, len(sizes))] * len(sizes))
    for power in (0.0, 0.2, 0.3, 0.37, 0.5, 1.0):
        assert expected_l1(chosen) < expected_l1(split_by_power(power))


def test_calls_made_compose_to_rho_exactly():
    """Every Gaussian call (sensitivity 1) and every Gumbel noisy-max call priced at zCDP rates adds up
    to the stated rho; the per-round budgets of the run sum to it too."""
    cfg = aim.Config(epsilon=1.0, delta=1e-9, **FAST)
    spy = SpyNoise(3)
    codes, dom, rel = run_toy(cfg, spy)
    rho = aim.privacy_cost(cfg).rho
    d = dom.n_attributes
    delta_q = max(aim.candidate_weights(aim.workload(cfg, dom)).values())
    facts = rel.public_facts
    # Selection by rejection (select_eligible) may draw more than once a round; only the pick leaves it.
    assert len(spy.max_calls) >= facts["rounds"] >= 1
    assert len(spy.gaussian_calls) == d + facts["rounds"]
    # The start: every 1-way marginal at its own sigma_a (one call each, one cell per level).
    assert [size for _, size in spy.gaussian_calls[:d]] == list(dom.sizes)
    assert [s for s, _ in spy.gaussian_calls[:d]] == list(aim.start_sigmas(cfg, dom.sizes))
    gaussian = sum(1.0 / (2 * s**2) for s, _ in spy.gaussian_calls)
    # noisy_max at scale b on scores of sensitivity Delta is Delta^2 / (2 b^2)-zCDP, once a round.
    selection = sum(delta_q**2 / (2 * (2 * delta_q / e) ** 2) for e in facts["selection_epsilons"])
    assert gaussian + selection == pytest.approx(rho, rel=1e-12)
    assert facts["rho_initial_one_way"] + math.fsum(facts["rho_per_round"]) == pytest.approx(rho, rel=1e-12)
    # Each round: Gumbel scale 2 Delta / eps_t, i.e. eps_t^2 / 8.
    round_scales = [2 * delta_q / e for e in facts["selection_epsilons"]]
    assert all(any(b == pytest.approx(r, rel=1e-15) for r in round_scales) for b, _ in spy.max_calls)
    for eps_t, rho_t, sigma_t in zip(facts["selection_epsilons"], facts["rho_per_round"], facts["sigmas"]):
        assert eps_t**2 / 8 + 1 / (2 * sigma_t**2) == pytest.approx(rho_t, rel=1e-12)
    # The last round spends exactly what was left: 0.9 of it measures.
    last = facts["rho_per_round"][-1]
    assert 1 / (2 * facts["sigmas"][-1] ** 2) == pytest.approx(0.9 * last, rel=1e-12)


def test_annealing_halves_sigma_and_doubles_epsilon():
    cfg = aim.Config(epsilon=3.0, delta=1e-9, **FAST)
    _, _, rel = run_toy(cfg, SeededNoise(1, "test-key"))
    sigmas = rel.public_facts["sigmas"][:-1]   # the last round is set by what is left
    epsilons = rel.public_facts["selection_epsilons"][:-1]
    for s0, s1, e0, e1 in zip(sigmas, sigmas[1:], epsilons, epsilons[1:]):
        assert (s1, e1) in {(s0, e0), (s0 / 2, e0 * 2)}


# ---------------------------------------------------------------- selection

def test_candidate_weights_hand_computed():
    dom = Domain(("a", "b", "c"), (2, 2, 2))
    work = aim.workload(aim.Config(k=2), dom)
    assert work == {(0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0}
    w = aim.candidate_weights(work)
    # w_r = sum_s c_s |r ∩ s|: (0,) meets (0,1) and (0,2) once each; (0,1) meets (0,1) twice, the others once.
    assert w[(0,)] == 2 and w[(1,)] == 2 and w[(0, 1)] == 4
    heavy = aim.workload(aim.Config(k=2, marginal_weights=(((1, 0), 3.0), ((1, 2), 0.0))), dom)
    assert heavy == {(0, 1): 3.0, (0, 2): 1.0, (1, 2): 0.0}
    w2 = aim.candidate_weights(heavy)
    assert w2[(0, 1)] == 3 * 2 + 1 and w2[(0,)] == 3 + 1 and w2[(2,)] == 1
    assert (1, 2) not in w2            # only in a weight-0 workload marginal


def test_candidate_weights_equal_the_definition_on_random_weighted_workloads():
    rng = np.random.default_rng(3)
    for _ in range(5):
        work = {m: float(rng.choice([0.0, 0.5, 1.0, 2.0])) for m in itertools.combinations(range(6), 3)}
        if not any(work.values()):
            continue
        closure = set()
        for m, c in work.items():
            if c > 0:
                closure |= {r for k in (1, 2, 3) for r in itertools.combinations(m, k)}
        expected = {r: sum(c * len(set(r) & set(s)) for s, c in work.items()) for r in closure}
        got = aim.candidate_weights(work)
        assert got.keys() == {r for r, w in expected.items() if w > 0}
        for r, w in got.items():
            assert w == pytest.approx(expected[r], rel=1e-12)


def test_selection_score_sensitivity_is_the_weight():
    """q_r on two neighbouring tables (one record added) differs by at most w_r, and by exactly w_r for
    a marginal whose changed cell lies above the model's estimate."""
    codes, dom = toy_data(0, 500)
    cfg = aim.Config(k=2)
    cands = aim.candidate_weights(aim.workload(cfg, dom))
    rng = np.random.default_rng(0)
    for _trial in range(5):
        extra = np.array([[rng.integers(0, s) for s in dom.sizes]], dtype=np.int32)
        big = np.vstack([codes, extra])
        c1 = aim.collect_statistics(Histogram.of_codes(codes), dom, cfg).tables(list(cands))
        c2 = aim.collect_statistics([big[:100], big[100:]], dom, cfg).tables(list(cands))
        # Any data-free model estimate: uniform tables with random jitter.
        est = {r: np.full(c1[r].shape, 500.0 / c1[r].size) + rng.normal(0, 3, c1[r].shape) for r in cands}
        q1 = aim.selection_scores(cands, c1, est, sigma=7.0)
        q2 = aim.selection_scores(cands, c2, est, sigma=7.0)
        w = np.array(list(cands.values()))
        assert np.all(np.abs(q2 - q1) <= w * (1 + 1e-12))
        assert np.any(np.isclose(np.abs(q2 - q1), w))


def test_statistics_from_histogram_and_batches_agree():
    codes, dom = toy_data(2, 1000)
    cfg = aim.Config(k=3)
    cands = list(aim.candidate_weights(aim.workload(cfg, dom)))
    h = aim.collect_statistics(Histogram.of_codes(codes), dom, cfg).tables(cands)
    b = aim.collect_statistics([codes[:7], codes[7:600], codes[600:]], dom, cfg).tables(cands)
    assert h.keys() == b.keys() == set(cands)
    for r in h:
        np.testing.assert_array_equal(h[r], b[r])
        np.testing.assert_array_equal(h[r].ravel(), marginal_counts(codes, dom, r))


# ---------------------------------------------------------------- config checks

def test_check_config_names_the_option():
    dom = Domain(("a", "b"), (2, 3))
    with pytest.raises(ValueError, match="k=3 exceeds the number of attributes"):
        aim.check_config(aim.Config(k=3), dom)
    dom4 = Domain(("a", "b", "c", "d"), (2, 2, 2, 2))
    with pytest.raises(ValueError, match="marginal_weights: \\(0, 1\\) is not a 3-way marginal"):
        aim.check_config(aim.Config(marginal_weights=(((0, 1), 2.0),)), dom4)
    with pytest.raises(ValueError, match="marginal_weights: \\(0, 1, 7\\)"):
        aim.check_config(aim.Config(marginal_weights=(((0, 1, 7), 2.0),)), dom4)
    zero = tuple((m, 0.0) for m in itertools.combinations(range(4), 3))
    with pytest.raises(ValueError, match="at least one workload marginal needs a weight > 0"):
        aim.check_config(aim.Config(marginal_weights=zero), dom4)
    assert aim.check_config(aim.Config(), dom4) is None
    with pytest.raises(ValidationError, match="marginal_weights"):
        aim.Config(marginal_weights=(((0, 1, 2), -1.0),))
    with pytest.raises(ValidationError, match="max_model_size_mb"):
        aim.Config(max_model_size_mb=0)
    with pytest.raises(ValidationError, match="iterations_per_round"):
        aim.Config(iterations_per_round=0)
    with pytest.raises(ValidationError, match="tolerance"):
        aim.Config(tolerance=-1.0)
    with pytest.raises(ValidationError, match="max_rounds"):
        aim.Config(max_rounds=0)


# ---------------------------------------------------------------- the graphical model

def brute_force_joint(model: GraphicalModel) -> np.ndarray:
    log_p = np.zeros(model.sizes)
    d = len(model.sizes)
    for c, theta in model.potentials.items():
        shape = [model.sizes[a] if a in c else 1 for a in range(d)]
        log_p = log_p + theta.reshape(shape)
    p = np.exp(log_p - log_p.max())
    return p / p.sum() * model.total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inference_matches_brute_force(seed):
    """Clique and out-of-clique marginals (junction tree conditionals) equal the brute-force joint's."""
    rng = np.random.default_rng(seed)
    sizes = (2, 3, 2, 4, 3, 2)
    cliques = [(0, 1), (1, 2, 3), (3, 4), (5,), (2, 4)] if seed else [(0, 1), (2, 3), (4,), (5,)]
    model = GraphicalModel(sizes, cliques, total=1000.0)
    model.potentials = {c: rng.normal(0, 1.5, [sizes[a] for a in c]) for c in model.model_cliques}
    model.beliefs = model._calibrate(model.potentials)
    joint = brute_force_joint(model)
    for r in [(0,), (0, 1), (1, 3), (0, 3), (0, 4, 5), (0, 2, 4), (1, 4, 5), (0, 1, 2, 3, 4, 5)]:
        axes = tuple(a for a in range(len(sizes)) if a not in r)
        np.testing.assert_allclose(model.marginal(r), joint.sum(axis=axes), rtol=1e-9, atol=1e-9)
    # The log-space fallback agrees with the probability-space calibration.
    log_psi = [np.zeros(model.tree.shape(i)) for i in range(len(model.tree.cliques))]
    for c, theta in model.potentials.items():
        h = model.hosts[c]
        log_psi[h] = log_psi[h] + theta.reshape([sizes[a] if a in c else 1 for a in model.tree.cliques[h]])
    for b1, b2 in zip(model.beliefs, model._calibrate_log(log_psi)):
        np.testing.assert_allclose(b1, b2, rtol=1e-9)


def test_estimation_recovers_consistent_marginals():
    """Fitted to exact marginals of a table, the model reproduces them."""
    codes, dom = toy_data(0, 5000)
    measured = [NoisyMarginal(r, marginal_counts(codes, dom, r).reshape([dom.sizes[a] for a in r]), 1.0)
                for r in [(0, 1), (1, 2), (2, 3), (4,)]]
    model = GraphicalModel(dom.sizes, [m.clique for m in measured], total=5000.0)
    model.fit(measured, 1500)
    for m in measured:
        np.testing.assert_allclose(model.marginal(m.clique), m.values, atol=2.0)


def test_warm_start_keeps_the_fit():
    codes, dom = toy_data(0, 5000)
    measured = [NoisyMarginal(r, marginal_counts(codes, dom, r).reshape([dom.sizes[a] for a in r]), 1.0)
                for r in [(0, 1), (1, 2), (3,), (4,)]]
    model = GraphicalModel(dom.sizes, [m.clique for m in measured], total=5000.0)
    model.fit(measured, 1000)
    grown = GraphicalModel(dom.sizes, model.model_cliques + [(1, 2, 3)], 5000.0, model.potentials)
    for m in measured:
        np.testing.assert_allclose(grown.marginal(m.clique), model.marginal(m.clique), rtol=1e-9)


def test_a_warm_started_fit_still_learns_a_new_measurement_after_one_ran_to_its_floor():
    """Found on a 4-column table: a fit run to its floating-point floor halves its step on every rejected try
    (to about 1e-17); the next fit, warm started there, never moved, so aim re-selected the one marginal its
    model had not learnt, round after round. The warm start now never starts below the curvature's step."""
    codes, dom = toy_data(0, 5000)
    ones = [NoisyMarginal((a,), marginal_counts(codes, dom, (a,)), 1.0) for a in range(dom.n_attributes)]
    model = GraphicalModel(dom.sizes, [(a,) for a in range(dom.n_attributes)], total=5000.0)
    model.fit(ones, 500)
    pair = NoisyMarginal((0, 1), marginal_counts(codes, dom, (0, 1)).reshape(dom.sizes[0], dom.sizes[1]), 1.0)
    grown = GraphicalModel(dom.sizes, [(0, 1), *[(a,) for a in range(2, dom.n_attributes)]], 5000.0,
                           model.potentials)
    before = float(np.abs(grown.marginal((0, 1)) - pair.values).sum())
    grown.fit([*ones, pair], 200, 7e-17)  # the step a fit of a 4-column table left after reaching its floor
    after = float(np.abs(grown.marginal((0, 1)) - pair.values).sum())
    assert after < 0.1 * before


def test_sampling_follows_the_model_within_rounding():
    rng = np.random.default_rng(4)
    sizes = (3, 4, 2, 5)
    model = GraphicalModel(sizes, [(0, 1), (1, 2), (2, 3)], total=1.0)
    model.potentials = {c: rng.normal(0, 1, [sizes[a] for a in c]) for c in model.model_cliques}
    model.beliefs = model._calibrate(model.potentials)
    rows = 20000
    codes = model.sample(rows, np.random.default_rng(0))
    dom = Domain(("a", "b", "c", "d"), sizes)
    for r in [(0,), (1,), (0, 1), (2, 3)]:
        counts = marginal_counts(codes, dom, r)
        expected = model.marginal(r).ravel() * rows
        # Systematic sampling per separator cell: the root clique's cells are within one record.
        tol = 1.0 + 1e-9 if r in [(0,), (1,), (0, 1)] else 4 * np.sqrt(expected) + 2
        assert np.all(np.abs(counts - expected) <= tol)


def mbi_model_size_mb(sizes, cliques) -> float:
    """mbi's own ``hypothetical_model_size``: the reference (mbi is a test dependency only)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mbi = pytest.importorskip("mbi")
    return float(mbi.junction_tree.hypothetical_model_size(mbi.Domain(tuple(range(len(sizes))), tuple(sizes)),
                                                           list(cliques)))


def test_model_size_matches_mbi():
    rng = np.random.default_rng(5)
    for _ in range(120):
        d = int(rng.integers(2, 12))
        sizes = tuple(int(x) for x in rng.integers(1, 10, d))
        cliques = [tuple(sorted(rng.choice(d, size=int(rng.integers(1, min(d, 3) + 1)), replace=False).tolist()))
                   for _ in range(int(rng.integers(1, 6)))]
        assert model_size_mb(sizes, cliques) == pytest.approx(mbi_model_size_mb(sizes, cliques), rel=1e-12)


def test_clique_helpers():
    assert maximal_subsets([(0, 1), (1,), (0, 1), (1, 2)]) == [(0, 1), (1, 2)]
    assert downward_closure([(0, 2)]) == {(0,), (2,), (0, 2)}


# ---------------------------------------------------------------- end to end

def test_toy_release_is_a_valid_weighted_one_hot_table():
    cfg = aim.Config(epsilon=1.0, k=3, **FAST)
    codes, dom, rel = run_toy(cfg, SeededNoise(0, "test-key"))
    rel.check_domain(dom)
    assert rel.mechanism == "aim" and not rel.exact
    assert set(np.unique(rel.points)) <= {0.0, 1.0}
    assert len({tuple(p) for p in rel.points}) == rel.points.shape[0]        # distinct rows
    assert rel.weights.sum() == pytest.approx(1.0)
    assert abs(rel.public_facts["n_estimate"] - codes.shape[0]) < 0.1 * codes.shape[0]
    assert all(isinstance(m, Measurement) and m.noise == "gaussian" for m in rel.measurements)
    assert len(rel.measurements) == dom.n_attributes + rel.public_facts["rounds"]
    for m in rel.measurements:
        assert m.noisy_counts.shape == (dom.size_of(m.attributes),)
    synthetic = round_release(rel, dom, 2000, np.random.default_rng(0))
    assert synthetic.shape == (2000, dom.n_attributes)


def test_same_seed_same_release_and_registered():
    assert get_mechanism("aim") is not None and get_mechanism("aim").NAME == "aim"
    cfg = aim.Config(epsilon=0.5, k=2, **FAST)
    _, _, r1 = run_toy(cfg, SeededNoise(7, "test-key"))
    _, _, r2 = run_toy(cfg, SeededNoise(7, "test-key"))
    np.testing.assert_array_equal(r1.points, r2.points)
    np.testing.assert_array_equal(r1.weights, r2.weights)


@pytest.mark.slow
def test_small_adult_sample_end_to_end():
    import pandas as pd

    from privsynth.schema import load_schema
    from privsynth.schema.encoding import domain_of, encode_codes

    schema = load_schema(ROOT / "schemas" / "adult.yaml")
    frame = pd.read_csv(ROOT / "privsynth" / "data" / "adult.csv.gz").sample(3000, random_state=0)
    codes, dom = encode_codes(frame, schema), domain_of(schema)
    cfg = aim.Config(epsilon=1.0, max_model_size_mb=1.0, iterations_per_round=30, final_iterations=100)
    aim.check_config(cfg, dom)
    noise = SeededNoise(0, "test-key")
    noise.authorize("test")
    rel = aim.run(aim.collect_statistics(Histogram.of_codes(codes), dom, cfg), dom, cfg, noise)
    rel.check_domain(dom)
    assert rel.public_facts["rounds"] >= 1
    assert round_release(rel, dom, 3000, noise.post_rng).shape == (3000, dom.n_attributes)


# ---------------------------------------------------------------- wide tables: candidate pools

def test_a_round_scores_every_candidate_up_to_the_cap_then_a_data_free_random_subset():
    cands = {(a, b): float(a + b + 1) for a, b in itertools.combinations(range(10), 2)}   # 45 candidates
    assert aim.round_pool(cands, 45, np.random.default_rng(0)) == cands
    pool = aim.round_pool(cands, 12, np.random.default_rng(1))
    assert len(pool) == 12 and all(cands[r] == w for r, w in pool.items())
    # The subset depends on the generator only (it never sees counts): same generator, same subset.
    assert aim.round_pool(cands, 12, np.random.default_rng(1)) == pool
    # Every candidate gets its turn across rounds.
    rng = np.random.default_rng(2)
    seen = set()
    for _ in range(40):
        seen |= set(aim.round_pool(cands, 12, rng))
    assert seen == set(cands)


def test_candidates_inside_the_junction_tree_are_free_and_the_rest_are_size_checked():
    from privsynth.mechanisms.aim.model import GraphicalModel, model_size_mb

    sizes = (4, 4, 4, 4, 4)
    model = GraphicalModel(sizes, [(0, 1, 2), (2, 3)], total=100.0)
    cands = [r for r in itertools.combinations(range(5), 2)] + [(0, 1, 2), (1, 3, 4)]
    none_may_grow = aim.Eligibility(model, size_limit=0.0)
    assert {r for r in cands if none_may_grow(r)} == {(0, 1), (0, 2), (1, 2), (2, 3), (0, 1, 2)}
    limit = model_size_mb(sizes, [tuple(c) for c in model.tree.cliques] + [(1, 3, 4)])
    assert aim.Eligibility(model, size_limit=limit)((1, 3, 4))
    assert not aim.Eligibility(model, size_limit=limit * 0.99)((1, 3, 4))


def test_selection_by_rejection_has_the_exponential_mechanisms_law_on_the_eligible_set():
    """select_eligible's picks follow softmax(scores / scale) restricted to the eligible set, whether
    they come from an accepted try or from the final draw over the eligible set."""
    scores = np.array([5.0, 4.0, 3.0, 0.0, -1.0, 2.0])
    eligible = {1, 3, 5}
    scale = 1.5
    law = np.exp(scores / scale)
    law = np.where([i in eligible for i in range(scores.size)], law, 0.0)
    law /= law.sum()
    noise = SeededNoise(0, "test-key")
    noise.authorize("test")
    draws = 20000
    picks = np.array([aim.select_eligible(scores, eligible.__contains__, noise, scale, 1.0) for _ in range(draws)])
    assert set(np.unique(picks)) <= eligible
    freq = np.bincount(picks, minlength=scores.size) / draws
    assert np.all(np.abs(freq - law) <= 4 * np.sqrt(law * (1 - law) / draws) + 1e-12)
    # Tiny eligible mass: the fallback draw over the eligible set keeps the same law.
    hard = np.array([50.0, 0.0, 1.0])
    picks = np.array([aim.select_eligible(hard, lambda i: i > 0, noise, 1.0, 1.0) for _ in range(4000)])
    assert set(np.unique(picks)) == {1, 2}
    assert np.mean(picks == 2) == pytest.approx(np.e / (1 + np.e), abs=0.03)


def test_a_pool_always_keeps_every_one_way_candidate():
    cands = {(a,): 1.0 for a in range(6)} | {r: 2.0 for r in itertools.combinations(range(6), 3)}
    pool = aim.round_pool(cands, 10, np.random.default_rng(0))
    assert len(pool) == 10 and all((a,) in pool for a in range(6))


def test_a_capped_pool_still_spends_exactly_rho():
    cfg = aim.Config(epsilon=1.0, delta=1e-9, max_candidates=5, **FAST)
    spy = SpyNoise(4)
    _, _, rel = run_toy(cfg, spy)
    rho = aim.privacy_cost(cfg).rho
    gaussian = sum(1.0 / (2 * s**2) for s, _ in spy.gaussian_calls)
    selection = sum(e**2 / 8 for e in rel.public_facts["selection_epsilons"])
    assert gaussian + selection == pytest.approx(rho, rel=1e-12)
    assert all(size <= 5 for _, size in spy.max_calls)
    assert len(rel.public_facts["measured_marginals"]) == rel.public_facts["rounds"]


def test_out_of_model_marginals_on_a_table_wider_than_einsums_alphabet():
    """Attribute indices past 52 (numpy einsum's letters) are relabelled before contraction."""
    d = 60
    sizes = (2,) * d
    model = GraphicalModel(sizes, [(0, 55), (55, 58), (58, 59), (3, 4)], total=10.0)
    rng = np.random.default_rng(0)
    measurements = [NoisyMarginal(c, rng.uniform(1, 4, (2,) * len(c)), 1.0) for c in [(0, 55), (55, 58), (58, 59)]]
    model.fit(measurements, 50)
    m = model.marginal((0, 58, 59))
    assert m.shape == (2, 2, 2) and m.sum() == pytest.approx(10.0)
    np.testing.assert_allclose(m.sum(axis=0), model.marginal((58, 59)), rtol=1e-9)


@pytest.mark.parametrize("d, t", [(4, 16), (15, 60), (16, 64), (17, 60), (30, 45), (54, 81), (100, 150)])
def test_default_rounds_parameter_is_four_per_attribute_then_falls_to_one_and_a_half(d, t):
    cfg = aim.Config(epsilon=1.0)
    assert aim.rounds_parameter(cfg, d) == t
    assert aim.rounds_parameter(aim.Config(epsilon=1.0, max_rounds=7), d) == 7
    # The 1-way start never takes more than 60% of rho.
    assert d * gaussian_rho(aim.initial_sigma(cfg, d)) <= 0.6 * aim.rho_of_config(cfg) * (1 + 1e-12)
