"""RAP: accounting against the spec's hand-computed values, the calls actually made to the noise
source, score sensitivity on neighbouring tables, noise-free convergence, selection, rounding,
reproducibility, and the array backend (sparsemax, gradients)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from privsynth.mechanisms.rap import mechanism as rap
from privsynth.mechanisms.rap.backend import (
    MarginalPlan,
    block_softmax,
    blockwise,
    cell_scores,
    marginal_l1_scores,
    softmax,
    sparsemax,
)
from privsynth.mechanisms.rounding import round_release
from privsynth.privacy.accounting import rho_from_epsilon_delta
from privsynth.privacy.noise import NoiseSource, SeededNoise
from privsynth.privacy.spending import rho_allowance
from privsynth.schema.encoding import Domain, one_hot
from privsynth.schema.workload import all_marginals, marginal_counts, relaxed_marginal

ADULT_DELTA = 1.0 / 48842**2


# ---------------------------------------------------------------- helpers

class SpyNoise(SeededNoise):
    """Seeded noise that records every privacy call (and can switch the noise off: a test hook)."""

    def __init__(self, seed: int, zero: bool = False) -> None:
        super().__init__(seed, "test-key")
        self.zero = zero
        self.gaussian_calls: list[tuple[float, int]] = []
        self.top_k_calls: list[tuple[float, int, int]] = []
        self.picked: list[np.ndarray] = []

    def _gaussian(self, scale: float, size: int) -> np.ndarray:
        self.gaussian_calls.append((scale, size))
        return np.zeros(size) if self.zero else super()._gaussian(scale, size)

    def _noisy_top_k(self, scores: np.ndarray, scale: float, k: int) -> np.ndarray:
        self.top_k_calls.append((scale, scores.size, k))
        if self.zero:
            out = np.argsort(-scores, kind="stable")[:k]
        else:
            out = super()._noisy_top_k(scores, scale, k)
        self.picked.append(out)
        return out


def small_data(seed: int = 0, n: int = 3000) -> tuple[np.ndarray, Domain]:
    """A structured small table: a chain a -> b -> c -> d."""
    rng = np.random.default_rng(seed)
    dom = Domain(("a", "b", "c", "d"), (3, 4, 2, 3))
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = (b > 1).astype(int) ^ (rng.random(n) < 0.1)
    d = (c + a + rng.integers(0, 2, n)) % 3
    return np.column_stack([a, b, c, d]).astype(np.int32), dom


def run_small(config: rap.Config, noise: NoiseSource, seed: int = 0):
    codes, dom = small_data(seed)
    stats = rap.collect_statistics([codes[:1000], codes[1000:]], dom, config)
    noise.authorize("test")
    return codes, dom, stats, rap.run(stats, dom, config, noise)


# ---------------------------------------------------------------- accounting (spec 7.1)

@pytest.mark.parametrize("eps,rho", [(0.05, 2.891151e-05), (0.10, 1.155126e-04), (0.15, 2.596039e-04),
                                     (0.20, 4.609872e-04), (0.25, 7.194655e-04), (0.50, 2.861463e-03),
                                     (1.00, 1.131741e-02)])
def test_rho_matches_spec_table(eps, rho):
    # The spec's table is RAP's classic inversion; rap itself now spends the tight allowance, which
    # is larger (the classic bound is loose) and converts back to exactly the requested epsilon.
    assert rho_from_epsilon_delta(eps, ADULT_DELTA) == pytest.approx(rho, rel=2e-6)
    cfg = rap.Config(epsilon=eps, delta=ADULT_DELTA)
    assert rap.budget(cfg).rho == rho_allowance(eps, ADULT_DELTA)
    assert rap.privacy_cost(cfg).rho == rho_allowance(eps, ADULT_DELTA)
    assert rap.privacy_cost(cfg).rho > rho
    assert rap.privacy_cost(cfg).epsilon_at(ADULT_DELTA) == pytest.approx(eps, rel=1e-6)


def test_rho_generic_values_and_round_trip():
    assert rho_from_epsilon_delta(1.0, 1e-5) == pytest.approx(2.08199383e-02, rel=1e-8)
    assert rho_from_epsilon_delta(1.0, 1e-6) == pytest.approx(1.74689048e-02, rel=1e-8)
    rho = rho_from_epsilon_delta(0.3, 1e-9)
    assert rho + 2 * math.sqrt(rho * math.log(1e9)) == pytest.approx(0.3, rel=1e-12)


@pytest.mark.parametrize("eps,t,k,sigma", [(0.1, 10, 10, 1.904987e-02), (0.1, 2, 5, 6.024096e-03),
                                           (0.1, 50, 100, 1.347029e-01), (1.0, 10, 10, 1.924567e-03)])
def test_sigma_matches_spec_examples(eps, t, k, sigma):
    # The spec's sigma = sqrt(TK/rho)/n is on proportions with all of rho split over 2TK calls; ours
    # is on counts and first sets aside n_hat_share of rho, so sigma_counts / n = spec / sqrt(1 - share).
    # The spec's rho is the classic inversion; ours is rho_allowance, so sigma scales by sqrt(classic / tight).
    cfg = rap.Config(epsilon=eps, delta=ADULT_DELTA, rounds=t, picks_per_round=k, n_hat_share=0.01)
    b = rap.budget(cfg)
    assert b.sigma == b.beta
    ratio = math.sqrt(rho_allowance(eps, ADULT_DELTA) / rho_from_epsilon_delta(eps, ADULT_DELTA))
    assert b.sigma / 48842 * math.sqrt(1 - 0.01) * ratio == pytest.approx(sigma, rel=2e-6)
    assert b.sigma == pytest.approx(math.sqrt(t * k / ((1 - 0.01) * rho_allowance(eps, ADULT_DELTA))), rel=1e-12)
    assert b.rho_n + 2 * t * k * b.rho0 == pytest.approx(b.rho, rel=1e-12)


def test_reported_epsilon_is_the_requested_one():
    for eps in (0.3, 1.0, 3.0):
        cfg = rap.Config(epsilon=eps, delta=1e-9)
        assert rap.privacy_cost(cfg).epsilon_at(1e-9) <= eps * (1 + 1e-9)
        assert rap.privacy_cost(cfg).epsilon_at(1e-9) == pytest.approx(eps, rel=1e-6)


@pytest.mark.parametrize("selection", ["marginal", "cell"])
def test_calls_made_compose_to_rho(selection):
    """The noise calls actually made, priced at zCDP rates, add up to the stated rho."""
    cfg = rap.Config(epsilon=1.0, rounds=3, picks_per_round=2, selection=selection, synthetic_rows=50,
                     max_iterations=20)
    spy = SpyNoise(1)
    run_small(cfg, spy)
    b = rap.budget(cfg)
    assert len(spy.top_k_calls) == cfg.rounds
    assert all(scale == b.beta and k == cfg.picks_per_round for scale, _, k in spy.top_k_calls)
    # n_hat first (sensitivity 1), then one Gaussian per pick, each on an L2-sensitivity-1 vector.
    assert spy.gaussian_calls[0] == (b.sigma_n, 1)
    assert len(spy.gaussian_calls) == 1 + cfg.rounds * cfg.picks_per_round
    assert all(scale == b.sigma for scale, _ in spy.gaussian_calls[1:])
    spent = 1 / (2 * b.sigma_n**2) + sum(1 / (2 * s**2) for s, _ in spy.gaussian_calls[1:]) \
        + sum(k / (2 * s**2) for s, _, k in spy.top_k_calls)
    assert spent == pytest.approx(rap.privacy_cost(cfg).rho, rel=1e-12)


def test_one_shot_budget_parts_sum_to_rho_hand_computed():
    # eps 1, delta 1e-9: rho = rho_allowance(1, 1e-9) (tight conversion); 1-way share 0.1 over d = 15
    # attributes: sigma = sqrt(15 / (2 * 0.1 * rho)); 2-way share 0.2 over 105 pairs: sqrt(105 / (0.4 rho)).
    rho = rho_allowance(1.0, 1e-9)
    cfg = rap.Config(epsilon=1.0, delta=1e-9, init_one_way_share=0.1, init_two_way_share=0.2,
                     rounds=5, picks_per_round=4, n_hat_share=0.01)
    b = rap.budget(cfg)
    assert b.rho == pytest.approx(rho, rel=1e-12)
    assert b.rho_one_way == pytest.approx(0.1 * rho, rel=1e-12)
    assert b.rho_two_way == pytest.approx(0.2 * rho, rel=1e-12)
    assert b.rho0 == pytest.approx(0.69 * rho / 40, rel=1e-12)
    assert b.rho_n + b.rho_one_way + b.rho_two_way + 2 * 5 * 4 * b.rho0 == pytest.approx(b.rho, rel=1e-12)
    assert rap.one_shot_sigma(b.rho_one_way, 15) == pytest.approx(math.sqrt(15 / (0.2 * rho)), rel=1e-12)
    assert rap.one_shot_sigma(b.rho_two_way, 105) == pytest.approx(math.sqrt(105 / (0.4 * rho)), rel=1e-12)
    assert rap.privacy_cost(cfg).rho == pytest.approx(rho, rel=1e-12)
    assert rap.privacy_cost(cfg).epsilon_at(1e-9) <= 1.0 + 1e-9


@pytest.mark.parametrize("shares", [(0.05, 0.0), (0.0, 0.2), (0.05, 0.2)])
def test_calls_made_with_one_shot_measurements_compose_to_rho(shares):
    """n_hat, then one Gaussian per one-shot order (L2 sensitivity sqrt(#marginals)), then the T K
    picks: priced at zCDP rates, the calls actually made add up to the stated rho."""
    one, two = shares
    cfg = rap.Config(epsilon=1.0, rounds=2, picks_per_round=2, synthetic_rows=50, max_iterations=20,
                     init_one_way_share=one, init_two_way_share=two)
    spy = SpyNoise(1)
    _, dom, _, rel = run_small(cfg, spy)
    b = rap.budget(cfg)
    d = dom.n_attributes
    orders = [(1, d, b.rho_one_way)] if one else []
    orders += [(2, d * (d - 1) // 2, b.rho_two_way)] if two else []
    assert spy.gaussian_calls[0] == (b.sigma_n, 1)
    spent = 1 / (2 * b.sigma_n**2)
    for pos, (order, n_marg, rho_part) in enumerate(orders, start=1):
        scale, size = spy.gaussian_calls[pos]
        assert size == sum(dom.size_of(m) for m in all_marginals(d, order))   # one draw, every cell
        assert scale == pytest.approx(math.sqrt(n_marg / (2 * rho_part)), rel=1e-12)
        assert rel.public_facts[f"sigma_init_{order}way"] == scale
        spent += n_marg / (2 * scale**2)       # sensitivity^2 / (2 sigma^2)
    rest = spy.gaussian_calls[1 + len(orders):]
    assert len(rest) == cfg.rounds * cfg.picks_per_round and all(s == b.sigma for s, _ in rest)
    spent += sum(1 / (2 * s**2) for s, _ in rest) + sum(k / (2 * s**2) for s, _, k in spy.top_k_calls)
    assert spent == pytest.approx(rap.privacy_cost(cfg).rho, rel=1e-12)
    # What was measured up front is never offered to selection again.
    assert all(len(m) not in {o for o, _, _ in orders} for m in rel.public_facts["measured_marginals"])


# ---------------------------------------------------------------- sensitivity on neighbours

def test_scores_and_measurements_have_sensitivity_one():
    codes, dom = small_data(3, n=500)
    rng = np.random.default_rng(0)
    marginals = [m for k in (1, 2, 3) for m in all_marginals(4, k)]
    plan = MarginalPlan(dom, marginals)
    x = blockwise(softmax, rng.normal(size=(20, dom.width)), dom)
    relaxed = plan.answers(x)
    base = plan.to_internal([marginal_counts(codes, dom, m) for m in marginals])
    for extra in rng.integers(0, [3, 4, 2, 3], size=(30, 4)).astype(np.int32):
        neighbour = np.vstack([codes, extra[None, :]])
        counts = plan.to_internal([marginal_counts(neighbour, dom, m) for m in marginals])
        n_hat = 512.3  # released earlier: fixed, the same on both tables
        d_marg = np.abs(marginal_l1_scores(plan, counts, n_hat, relaxed) - marginal_l1_scores(plan, base, n_hat,
                                                                                              relaxed))
        d_cell = np.abs(cell_scores(counts, n_hat, relaxed) - cell_scores(base, n_hat, relaxed))
        assert d_marg.max() <= 1 + 1e-9 and d_cell.max() <= 1 + 1e-9
        per_marginal_l2 = np.sqrt(np.add.reduceat((counts - base) ** 2, plan.starts[:-1]))
        assert np.allclose(per_marginal_l2, 1.0)


@pytest.mark.parametrize("order", [1, 2])
def test_one_shot_count_vector_has_l2_sensitivity_sqrt_marginals(order):
    """Adding one record moves exactly one cell of each of the C(d, order) marginals by 1."""
    codes, dom = small_data(4, n=400)
    marginals = all_marginals(dom.n_attributes, order)

    def vector(table: np.ndarray) -> np.ndarray:
        return np.concatenate([marginal_counts(table, dom, m) for m in marginals])

    base = vector(codes)
    rng = np.random.default_rng(1)
    for extra in rng.integers(0, [3, 4, 2, 3], size=(25, 4)).astype(np.int32):
        for neighbour in (np.vstack([codes, extra[None, :]]), codes[1:]):   # add one, remove one
            assert np.linalg.norm(vector(neighbour) - base) == pytest.approx(math.sqrt(len(marginals)), rel=1e-12)


def test_noise_free_one_way_init_starts_at_the_independent_model():
    """With the noise off and no jitter, the initial rows are the true 1-way distributions, so every
    unmeasured marginal starts at the independent model; the fit then keeps the 1-way marginals."""
    cfg = rap.Config(epsilon=1.0, rounds=1, picks_per_round=1, synthetic_rows=20, max_iterations=1,
                     init_one_way_share=0.05, init_perturbation=0.0, learning_rate=1e-6, size_penalty=False)
    codes, dom, stats, rel = run_small(cfg, SpyNoise(0, zero=True))
    n = codes.shape[0]
    ones = [marginal_counts(codes, dom, (a,)) / n for a in range(dom.n_attributes)]
    for a in range(dom.n_attributes):
        assert np.allclose(relaxed_marginal(rel.points, rel.weights, dom, (a,)), ones[a], atol=1e-4)
    independent = np.outer(ones[0], ones[2]).ravel()
    assert np.allclose(relaxed_marginal(rel.points, rel.weights, dom, (0, 2)), independent, atol=1e-4)


def test_noise_free_two_way_init_fits_all_pairs():
    cfg = rap.Config(epsilon=1.0, rounds=2, picks_per_round=1, synthetic_rows=100, max_iterations=800,
                     tolerance=1e-6, init_two_way_share=0.2)
    codes, dom, stats, rel = run_small(cfg, SpyNoise(0, zero=True))
    n = codes.shape[0]
    errors = [np.abs(relaxed_marginal(rel.points, rel.weights, dom, m) - marginal_counts(codes, dom, m) / n).max()
              for m in all_marginals(dom.n_attributes, 2)]
    assert max(errors) < 1e-2


# ---------------------------------------------------------------- selection and the loop

@pytest.mark.parametrize("selection", ["marginal", "cell"])
def test_selection_never_repeats(selection):
    cfg = rap.Config(epsilon=0.5, rounds=4, picks_per_round=3, selection=selection, synthetic_rows=40,
                     max_iterations=10, candidates="downward_closure")
    spy = SpyNoise(2)
    _, dom, _, rel = run_small(cfg, spy)
    cands = rap.candidate_marginals(cfg, dom)
    n_items = len(cands) if selection == "marginal" else MarginalPlan(dom, cands).total_cells
    measured = np.zeros(n_items, dtype=bool)
    for (_, size, _), picks in zip(spy.top_k_calls, spy.picked):
        assert size == n_items - measured.sum()      # only unmeasured items are offered
        open_items = np.flatnonzero(~measured)
        chosen = open_items[picks]
        assert not measured[chosen].any() and len(set(chosen)) == len(chosen)
        measured[chosen] = True
    assert measured.sum() == cfg.rounds * cfg.picks_per_round
    if selection == "marginal":
        assert len(rel.public_facts["measured_marginals"]) == cfg.rounds * cfg.picks_per_round


def test_too_many_picks_is_refused():
    cfg = rap.Config(epsilon=1.0, k=2, candidates="workload", rounds=4, picks_per_round=2)
    with pytest.raises(ValueError, match="rounds \\* picks_per_round"):
        run_small(cfg, SeededNoise(0, "test-key"))


def test_check_config_refuses_before_any_data_or_charge():
    """The default config on a 4-column table asks for 12 x 6 picks among 14 candidates: check_config
    (called by the plan before the budget is charged) refuses it from the config and domain alone."""
    _, dom = small_data()
    with pytest.raises(ValueError, match="rounds \\* picks_per_round = 72 exceeds the 14 candidate marginals"):
        rap.check_config(rap.Config(epsilon=1.0), dom)
    with pytest.raises(ValueError, match="k=3 exceeds the number of attributes"):
        rap.check_config(rap.Config(epsilon=1.0), Domain(("a", "b"), (2, 2)))
    assert rap.check_config(rap.Config(epsilon=1.0, rounds=2, picks_per_round=7), dom) is None
    cells = rap.Config(epsilon=1.0, selection="cell", rounds=10, picks_per_round=50)
    with pytest.raises(ValueError, match="candidate cells"):
        rap.check_config(cells, dom)   # 3*4*2*3 domain: far fewer than 500 cells in the closure


def test_the_default_fits_a_narrow_table_and_a_users_setting_is_kept():
    """The run's plan calls configure_for before check_config: on the 4-column table the default's 12 rounds stay
    and the picks fall to 1 (12 of the 14 candidates); the privacy cost is the same; rounds or picks the user set
    are not touched (check_config still names them)."""
    from privsynth.mechanisms.catalogue import load

    _, dom = small_data()
    mechanism = load("rap")
    fitted = mechanism.configure_for(rap.Config(epsilon=1.0), dom)
    assert (fitted.rounds, fitted.picks_per_round) == (12, 1)
    assert rap.check_config(fitted, dom) is None
    assert rap.privacy_cost(fitted).rho == rap.privacy_cost(rap.Config(epsilon=1.0)).rho  # the same total, split
    wide = Domain(tuple("abcdefg"), (2,) * 7)                          # 63 candidates: 12 rounds of 5
    assert (mechanism.configure_for(rap.Config(epsilon=1.0), wide).picks_per_round) == 5
    for user in (rap.Config(epsilon=1.0, rounds=20), rap.Config(epsilon=1.0, picks_per_round=6)):
        assert mechanism.configure_for(user, dom) is user
        with pytest.raises(ValueError, match="rounds \\* picks_per_round"):
            rap.check_config(user, dom)
    roomy = Domain(tuple("abcdefghij"), (2,) * 10)                     # 175 candidates: the default as it is
    assert mechanism.configure_for(rap.Config(epsilon=1.0), roomy) == rap.Config(epsilon=1.0)


def test_rap_package_keeps_the_module_contract():
    from privsynth.mechanisms import get_mechanism

    module = get_mechanism("rap")
    for name in ("NAME", "Config", "privacy_cost", "releases_n_estimate", "collect_statistics", "run", "check_config"):
        assert hasattr(module, name), name
    assert module.NAME == "rap" and module.run is rap.run


@pytest.mark.parametrize("parametrization", ["softmax", "sparsemax"])
def test_noise_free_projection_fits_measured_marginals(parametrization):
    """With the noise switched off, the relaxed rows reproduce every measured marginal."""
    cfg = rap.Config(epsilon=1.0, rounds=3, picks_per_round=2, synthetic_rows=100, max_iterations=800,
                     tolerance=1e-6, parametrization=parametrization,
                     learning_rate=0.05 if parametrization == "softmax" else 0.01)
    codes, dom, stats, rel = run_small(cfg, SpyNoise(0, zero=True))
    rel.check_domain(dom)
    n = codes.shape[0]
    errors = [np.abs(relaxed_marginal(rel.points, rel.weights, dom, tuple(m)) - marginal_counts(codes, dom,
                                                                                                tuple(m)) / n).max()
              for m in rel.public_facts["measured_marginals"]]
    assert max(errors) < 5e-3


def test_noise_free_cell_selection_drives_measured_cells_to_zero_error():
    cfg = rap.Config(epsilon=1.0, rounds=4, picks_per_round=5, selection="cell", synthetic_rows=100,
                     max_iterations=800, tolerance=1e-6)
    spy = SpyNoise(0, zero=True)
    codes, dom, stats, rel = run_small(cfg, spy)
    cands = rap.candidate_marginals(cfg, dom)
    plan = MarginalPlan(dom, cands)
    truth = plan.to_internal([stats.counts[m] for m in cands]) / codes.shape[0]
    fitted = plan.answers(rel.points)
    measured = np.zeros(plan.total_cells, dtype=bool)
    for picks in spy.picked:
        open_items = np.flatnonzero(~measured)
        measured[open_items[picks]] = True
    assert np.abs(fitted - truth)[measured].max() < 5e-3


def test_seeded_run_is_reproducible_and_seeds_differ():
    cfg = rap.Config(epsilon=1.0, rounds=2, picks_per_round=2, synthetic_rows=30, max_iterations=20)
    a = run_small(cfg, SeededNoise(5, "test-key"))[3]
    b = run_small(cfg, SeededNoise(5, "test-key"))[3]
    c = run_small(cfg, SeededNoise(6, "test-key"))[3]
    assert np.array_equal(a.points, b.points) and a.public_facts == b.public_facts
    assert not np.allclose(a.points, c.points)


def test_release_contract_and_public_facts():
    cfg = rap.Config(epsilon=1.0, rounds=2, picks_per_round=2, synthetic_rows=30, max_iterations=20)
    _, dom, _, rel = run_small(cfg, SeededNoise(0, "test-key"))
    rel.check_domain(dom)
    assert rel.exact is False and rel.points.shape == (30, dom.width)
    assert np.allclose(rel.weights, 1 / 30)
    allowed = {"rho", "sigma", "gumbel_beta", "sigma_n", "rounds", "picks_per_round", "selection",
               "synthetic_rows", "n_estimate", "measured_marginals", "sigma_init_1way", "sigma_init_2way"}
    assert set(rel.public_facts) <= allowed


def test_collect_statistics_streams_and_sums_submarginals():
    codes, dom = small_data(1)
    cfg = rap.Config(epsilon=1.0, k=3, candidates="downward_closure")
    stats = rap.collect_statistics([codes[:7], codes[7:2000], codes[2000:]], dom, cfg)
    assert stats.n == codes.shape[0]
    for m in rap.candidate_marginals(cfg, dom):
        assert np.array_equal(stats.counts[m], marginal_counts(codes, dom, m))


def test_config_validation_names_parameter():
    for bad, name in [({"epsilon": 0}, "epsilon"), ({"delta": 1.0}, "delta"), ({"rounds": 0}, "rounds"),
                      ({"n_hat_share": 0.7}, "n_hat_share"), ({"synthetic_rows": 0}, "synthetic_rows"),
                      ({"init_one_way_share": -0.1}, "init_one_way_share"),
                      ({"init_two_way_share": 0.5}, "init_two_way_share"),
                      ({"init_perturbation": -1.0}, "init_perturbation"),
                      ({"n_hat_share": 0.45, "init_one_way_share": 0.3, "init_two_way_share": 0.3},
                       "init_two_way_share")]:
        with pytest.raises(ValidationError, match=name):
            rap.Config(**bad)
    with pytest.raises(ValidationError):
        rap.Config(unknown=1)
    with pytest.raises(ValidationError):
        rap.Config(k=4)


# ---------------------------------------------------------------- rounding of the release

def test_rounding_is_valid_and_unbiased_on_marginals():
    cfg = rap.Config(epsilon=1.0, rounds=2, picks_per_round=2, synthetic_rows=40, max_iterations=30)
    _, dom, _, rel = run_small(cfg, SeededNoise(0, "test-key"))
    rng = np.random.default_rng(0)
    m = (0, 1, 3)
    relaxed = relaxed_marginal(rel.points, rel.weights, dom, m)
    acc = np.zeros_like(relaxed)
    reps, rows = 200, 400
    for _ in range(reps):
        codes = round_release(rel, dom, rows, rng)
        assert codes.shape == (rows, 4)
        assert (codes >= 0).all() and (codes < np.array(dom.sizes)).all()
        acc += marginal_counts(codes, dom, m) / rows
    mean = acc / reps
    tol = 5 * np.sqrt(relaxed * (1 - relaxed) / (rows * reps)) + 1e-4
    assert np.all(np.abs(mean - relaxed) <= tol)


# ---------------------------------------------------------------- backend

def test_sparsemax_known_values_and_properties():
    cases = {(0.5, 0.2, -0.3): (0.65, 0.35, 0.0), (1.0, 1.0): (0.5, 0.5), (3.0, 0.0, 0.0): (1.0, 0.0, 0.0),
             (0.0, 0.0, 0.0): (1 / 3, 1 / 3, 1 / 3), (-1.0, -1.0, 2.0): (0.0, 0.0, 1.0)}
    for z, p in cases.items():
        assert np.allclose(sparsemax(np.array([z])), [p])
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 6)) * 2
    p = sparsemax(z)
    assert (p >= 0).all() and np.allclose(p.sum(axis=1), 1)
    assert np.allclose(sparsemax(p), p)  # idempotent on the simplex
    # Euclidean projection: no simplex point on a random grid is closer than p.
    for row in range(5):
        others = rng.dirichlet(np.ones(6), size=2000)
        assert np.linalg.norm(p[row] - z[row]) <= np.linalg.norm(others - z[row], axis=1).min() + 1e-12


def test_block_softmax_matches_per_block_softmax():
    dom = Domain(("a", "b", "c"), (3, 1, 5))
    theta = np.random.default_rng(0).normal(size=(7, dom.width)) * 30
    x = block_softmax(theta, dom)
    assert np.allclose(x, blockwise(softmax, theta, dom))
    assert np.allclose(np.add.reduceat(x, dom.offsets[:-1], axis=1), 1.0)


def test_plan_answers_and_gradient():
    dom = Domain(("a", "b", "c", "d"), (3, 4, 2, 5))
    rng = np.random.default_rng(1)
    marginals = [m for k in (1, 2, 3) for m in all_marginals(4, k)]
    plan = MarginalPlan(dom, marginals)
    x = blockwise(softmax, rng.normal(size=(6, dom.width)), dom)
    canonical = [relaxed_marginal(x, np.full(6, 1 / 6), dom, m) for m in marginals]
    assert np.allclose(plan.answers(x), plan.to_internal(canonical), atol=1e-15)
    # On one-hot rows the relaxed answers are the true proportions (product-query identity).
    codes = rng.integers(0, [3, 4, 2, 5], size=(50, 4)).astype(np.int32)
    truth = plan.to_internal([marginal_counts(codes, dom, m) / 50 for m in marginals])
    assert np.allclose(plan.answers(one_hot(codes, dom).astype(float)), truth)
    target, weight = rng.random(plan.total_cells), rng.random(plan.total_cells)
    _, grad = plan.loss_and_grad(x, target, weight)
    h = 1e-6
    for i, j in [(0, 0), (2, 5), (5, 13), (3, 9)]:
        xp, xm = x.copy(), x.copy()
        xp[i, j] += h
        xm[i, j] -= h
        numeric = (plan.loss_and_grad(xp, target, weight)[0] - plan.loss_and_grad(xm, target, weight)[0]) / (2 * h)
        assert numeric == pytest.approx(grad[i, j], rel=1e-5, abs=1e-9)
