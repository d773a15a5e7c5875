"""AIM at scale: the fast table kernels and many-marginal inference against brute force, the mbi-free
junction tree against mbi, counting by covering sets, the selection law of the pruned pool, the round
cap's accounting, the cost forecast and its refusals, and the progress hook."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_aim import FAST, SpyNoise, brute_force_joint, run_toy, toy_data  # noqa: E402  (tests/ is on sys.path)

from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.aim import schedule
from privsynth.mechanisms.aim.compression import compress_levels
from privsynth.mechanisms.aim.cost import forecast_cost, release_row_bytes
from privsynth.mechanisms.aim.junction import JunctionTree, triangulation_cliques
from privsynth.mechanisms.aim.model import GraphicalModel
from privsynth.mechanisms.aim.progress import RoundProgress, reporting_progress
from privsynth.mechanisms.aim.selection import scored_pool, select_eligible
from privsynth.mechanisms.aim.statistics import AimStatistics, CountCache, covering_sets
from privsynth.mechanisms.aim.tables import combine, contract, sum_axes
from privsynth.privacy.accounting import exponential_rho, gaussian_rho
from privsynth.privacy.noise import SeededNoise
from privsynth.schema.encoding import Domain
from privsynth.schema.workload import Histogram, marginal_counts, merge_levels

# ---------------------------------------------------------------- table kernels


def test_sum_axes_equals_numpy_on_every_keep_pattern():
    rng = np.random.default_rng(0)
    for shape in [(3, 2, 5, 1, 4), (2,), (7, 2, 2, 3), (1, 1)]:
        x = rng.random(shape)
        for keep in itertools.product([True, False], repeat=len(shape)):
            axes = tuple(i for i, k in enumerate(keep) if not k)
            np.testing.assert_allclose(sum_axes(x, keep), x.sum(axis=axes), rtol=1e-12, atol=1e-12)


def test_contract_equals_einsum():
    rng = np.random.default_rng(1)
    sizes = (2, 3, 4, 2, 3, 5)
    for _ in range(60):
        ax = tuple(sorted(rng.choice(6, size=int(rng.integers(0, 5)), replace=False).tolist()))
        ay = tuple(sorted(rng.choice(6, size=int(rng.integers(0, 5)), replace=False).tolist()))
        union = sorted(set(ax) | set(ay))
        out = set(rng.choice(union, size=int(rng.integers(0, len(union) + 1)),
                             replace=False).tolist()) if union else set()
        x, y = rng.random([sizes[a] for a in ax]), rng.random([sizes[a] for a in ay])
        table, attrs = contract((x, ax), (y, ay), out)
        assert attrs == tuple(sorted(out & set(union)))
        np.testing.assert_allclose(table, np.einsum(x, list(ax), y, list(ay), list(attrs)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", [np.multiply, np.add])
def test_combine_equals_the_broadcast_product(op):
    rng = np.random.default_rng(2)
    sizes = (2, 3, 4, 2, 3)
    for _ in range(30):
        parts = []
        for _ in range(int(rng.integers(1, 7))):
            attrs = tuple(sorted(rng.choice(5, size=int(rng.integers(1, 4)), replace=False).tolist()))
            parts.append((rng.random([sizes[a] for a in attrs]) + 0.5, attrs))
        table, attrs = combine(parts, sizes, op)
        assert attrs == tuple(sorted(set().union(*(set(a) for _, a in parts))))
        brute = np.ones(sizes) if op is np.multiply else np.zeros(sizes)
        for t, a in parts:
            brute = op(brute, t.reshape([sizes[b] if b in a else 1 for b in range(5)]))
        full = np.broadcast_to(table.reshape([sizes[b] if b in attrs else 1 for b in range(5)]), sizes)
        np.testing.assert_allclose(full, brute, rtol=1e-12)


# ---------------------------------------------------------------- junction tree and inference

def random_cliques(rng, d, count, width=3):
    return [tuple(sorted(rng.choice(d, size=int(rng.integers(1, min(d, width) + 1)), replace=False).tolist()))
            for _ in range(count)]


def test_triangulation_equals_mbis_maximal_cliques():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pytest.importorskip("mbi")
        from mbi import Domain as MbiDomain
        from mbi import junction_tree

    rng = np.random.default_rng(3)
    for _ in range(60):
        d = int(rng.integers(2, 11))
        sizes = tuple(int(s) for s in rng.integers(1, 8, d))
        cliques = random_cliques(rng, d, int(rng.integers(1, 6)))
        graph, _ = junction_tree.make_junction_tree(MbiDomain(tuple(range(d)), sizes),
                                                    cliques + [(a,) for a in range(d)])
        assert triangulation_cliques(sizes, cliques) == sorted(tuple(sorted(n)) for n in graph.nodes)


def test_junction_tree_has_the_running_intersection_property():
    rng = np.random.default_rng(4)
    for _ in range(40):
        d = int(rng.integers(2, 12))
        sizes = tuple(int(s) for s in rng.integers(2, 5, d))
        cliques = random_cliques(rng, d, int(rng.integers(1, 7)))
        tree = JunctionTree(sizes, cliques)
        assert sorted(tree.order) == list(range(len(tree.cliques)))
        for c in cliques:
            assert tree.host(c) >= 0 and set(c) <= set(tree.cliques[tree.smallest_host(c)])
        for a in range(d):     # the cliques holding a form a connected subtree
            holders = {i for i, c in enumerate(tree.cliques) if a in c}
            tops = [i for i in holders if tree.parent[i] not in holders]
            assert len(tops) == 1


@pytest.mark.parametrize("seed", range(6))
def test_many_marginals_equal_the_brute_force_joint(seed):
    """Every marginal of up to three attributes (in a clique or across the tree) equals the joint's."""
    rng = np.random.default_rng(seed)
    d = 7
    sizes = tuple(int(s) for s in rng.integers(2, 4, d))
    model = GraphicalModel(sizes, random_cliques(rng, d, 5), total=500.0)
    model.potentials = {c: rng.normal(0, 1.5, [sizes[a] for a in c]) for c in model.model_cliques}
    model.beliefs = model._calibrate(model.potentials)
    joint = brute_force_joint(model)
    queries = [r for k in (1, 2, 3) for r in itertools.combinations(range(d), k)]
    answers = model.marginals().many(queries)
    for r in queries:
        expected = joint.sum(axis=tuple(a for a in range(d) if a not in r))
        np.testing.assert_allclose(answers[r], expected, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(model.marginal(r), expected, rtol=1e-9, atol=1e-9)


def test_clique_tables_are_the_exponential_of_the_summed_potentials():
    rng = np.random.default_rng(7)
    sizes = (3, 2, 4, 2)
    model = GraphicalModel(sizes, [(0, 1), (1, 2), (0, 2), (2, 3)], total=1.0)
    model.potentials = {c: rng.normal(0, 2, [sizes[a] for a in c]) for c in model.model_cliques}
    for table, log_table in zip(model._clique_tables(model.potentials), model._log_potentials(model.potentials)):
        expected = np.exp(log_table - log_table.max())
        np.testing.assert_allclose(table / table.max(), expected, rtol=1e-12)


# ---------------------------------------------------------------- counting

def test_covering_sets_serve_every_marginal_within_the_cap():
    rng = np.random.default_rng(8)
    sizes = tuple(int(s) for s in rng.integers(2, 9, 12))
    marginals = [r for k in (1, 2, 3) for r in itertools.combinations(range(12), k)]
    for cap in (64, 4096, 1 << 20):
        plans = covering_sets(marginals, sizes, cap)
        served = [q for _, qs in plans for q in qs]
        assert sorted(served) == sorted(marginals)                     # each exactly once
        for attrs, qs in plans:
            assert all(set(q) <= set(attrs) for q in qs)
            assert math.prod(sizes[a] for a in attrs) <= max(cap, max(math.prod(sizes[a] for a in q) for q in qs))


@pytest.mark.parametrize("cover_from", [0, 1 << 30])
def test_tables_on_original_and_merged_levels_are_exact(cover_from, monkeypatch):
    """Exact counts whether they are read one pass each or off covering sets."""
    from privsynth.mechanisms.aim import statistics

    monkeypatch.setattr(statistics, "COVER_FROM_RECORDS", cover_from)
    codes, dom = toy_data(5, 3000)
    stats = AimStatistics(Histogram.of_codes(codes), dom)
    marginals = [r for k in (1, 2, 3) for r in itertools.combinations(range(dom.n_attributes), k)]
    got = stats.tables(marginals)
    for r in marginals:
        np.testing.assert_array_equal(got[r].ravel(), marginal_counts(codes, dom, r))
    compression = compress_levels([np.array([500.0, 1.0, 2.0]), np.array([9.0, 1.0, 0.0, 8.0]), np.array([5.0, 5.0]),
                                   np.array([0.0, 0.0, 9.0]), np.array([4.0, 4.0])], [3.0] * 5)
    merged = stats.on_levels(compression)
    cache = CountCache(merged, max_cells=10)                            # tiny: evicts all the time
    for r in marginals:
        expected = merge_levels(marginal_counts(codes, dom, r).reshape([dom.sizes[a] for a in r]),
                                compression.level_groups(r))
        np.testing.assert_array_equal(cache.get([r, (0,)])[r], expected)
    assert cache.cells <= 10 + max(t.size for t in cache.tables.values()) * 2


# ---------------------------------------------------------------- selection law of the pruned pool

class _Plans:
    """A stand-in for inference.Marginals: a plan whose work is set per candidate."""

    def __init__(self, work):
        self.work = work

    def plan(self, r):
        return type("P", (), {"work": self.work[r]})()


class _Eligible:
    def __init__(self, allowed, size_limit=0.0):
        self.allowed, self.size_limit, self.asked = allowed, size_limit, []

    def __call__(self, r):
        self.asked.append(r)
        return r in self.allowed


def test_pruning_drops_only_ineligible_costly_candidates_and_keeps_the_law():
    """scored_pool leaves out costly candidates only when the size check refuses them; the picks of
    select_eligible on what is left follow softmax(scores / scale) over the eligible candidates of the
    whole pool: the law of the unpruned round (20,000 draws)."""
    pool = {(i,): 1.0 for i in range(8)}
    scores = {(i,): s for i, s in enumerate([3.0, 2.5, 2.0, 1.0, 0.5, 2.8, -1.0, 1.5])}
    allowed = {(0,), (2,), (3,), (6,), (7,)}
    work = {(i,): (1 << 30) if i in (0, 1, 4, 5) else 10 for i in range(8)}   # 0 costly but eligible
    eligible = _Eligible(allowed)
    kept = scored_pool(pool, _Plans(work), eligible)
    assert set(pool) - set(kept) == {(1,), (4,), (5,)}                         # costly and refused
    assert set(eligible.asked) == {(0,), (1,), (4,), (5,)}                      # the cheap ones are not checked
    names = list(kept)
    s = np.array([scores[r] for r in names])
    scale = 1.3
    noise = SeededNoise(3, "test-key")
    noise.authorize("test")
    draws = 20000
    picks = [names[select_eligible(s, lambda i: names[i] in allowed, noise, scale, 1.0)] for _ in range(draws)]
    law = {r: math.exp(scores[r] / scale) for r in allowed}
    total = sum(law.values())
    for r in allowed:
        p = law[r] / total
        freq = sum(1 for x in picks if x == r) / draws
        assert abs(freq - p) <= 4 * math.sqrt(p * (1 - p) / draws) + 1e-12
    assert set(picks) <= allowed


# ---------------------------------------------------------------- the round cap: schedule and accounting

def test_next_round_hand_computed():
    rho = 1.0
    sigma, eps = schedule.split(0.01)
    assert (gaussian_rho(sigma) == pytest.approx(0.009)
            and exponential_rho(eps) == pytest.approx(0.001))
    # Plenty left, early: the round keeps its budget.
    step = schedule.next_round(rho, 0.5, sigma, eps, rounds_done=3, cap=20)
    assert (step.sigma, step.epsilon, step.last) == (sigma, eps, False) and step.rho == pytest.approx(0.01)
    # Second half of the cap, 0.5 left over 10 rounds > 0.01: raised to 0.05, split 0.9 / 0.1.
    step = schedule.next_round(rho, 0.5, sigma, eps, rounds_done=10, cap=20)
    assert step.rho == pytest.approx(0.05) and not step.last
    assert (gaussian_rho(step.sigma) == pytest.approx(0.045)
            and exponential_rho(step.epsilon) == pytest.approx(0.005))
    # One round left under the cap, or less than two rounds' worth: the last round spends what is left.
    for done, used in ((19, 0.5), (3, 0.985)):
        step = schedule.next_round(rho, used, sigma, eps, rounds_done=done, cap=20)
        assert step.last and step.rho == pytest.approx(rho - used)
        assert gaussian_rho(step.sigma) + exponential_rho(step.epsilon) == pytest.approx(rho - used)


@pytest.mark.parametrize("cap", [2, 5, 9])
def test_a_round_cap_bounds_the_rounds_and_spends_exactly_rho(cap):
    cfg = aim.Config(epsilon=3.0, delta=1e-9, rounds_cap=cap, **FAST)
    spy = SpyNoise(6)
    _, dom, rel = run_toy(cfg, spy)
    facts = rel.public_facts
    rho = aim.privacy_cost(cfg).rho
    assert 1 <= facts["rounds"] <= cap
    gaussian = sum(1.0 / (2 * s**2) for s, _ in spy.gaussian_calls)
    selection = sum(e**2 / 8 for e in facts["selection_epsilons"])
    assert gaussian + selection == pytest.approx(rho, rel=1e-12)
    # Each round: the previous budget, x4 (annealing), the cap's share of what is left, or the rest.
    used, previous = facts["rho_initial_one_way"], rho / schedule.rounds_parameter(cfg, dom.n_attributes)
    for t, (rho_t, sigma_t, eps_t) in enumerate(zip(facts["rho_per_round"], facts["sigmas"],
                                                    facts["selection_epsilons"])):
        assert 1 / (2 * sigma_t**2) == pytest.approx(0.9 * rho_t, rel=1e-9)
        assert eps_t**2 / 8 == pytest.approx(0.1 * rho_t, rel=1e-9)
        left = rho - used
        options = [previous, 4 * previous, left / (cap - t), left]
        assert any(rho_t == pytest.approx(o, rel=1e-9) for o in options)
        used += rho_t
        previous = rho_t
    assert used == pytest.approx(rho, rel=1e-12)


# ---------------------------------------------------------------- cost forecast and refusals

def test_forecast_is_pure_and_grows_with_the_caps():
    dom = Domain(tuple("abcdefghij"), (4, 3, 6, 2, 5, 8, 3, 2, 7, 4))
    cfg = aim.Config(epsilon=1.0)
    f1, f2 = forecast_cost(cfg, dom), forecast_cost(cfg, dom)
    assert f1 == f2 and f1.seconds > 0 and f1.memory_mb > 0 and f1.rounds == len(schedule.largest_schedule(cfg, 10))
    assert f1.rounds <= schedule.rounds_cap(cfg, 10)
    assert forecast_cost(cfg.model_copy(update={"rounds_cap": 10}), dom).seconds < f1.seconds
    assert forecast_cost(cfg.model_copy(update={"iterations_per_round": 20}), dom).seconds < f1.seconds
    assert forecast_cost(cfg.model_copy(update={"max_model_size_mb": 64.0}), dom).seconds_bound > f1.seconds_bound
    assert f1.seconds <= f1.seconds_bound
    # Declaring the public row count adds the counting time and the histogram's memory.
    declared = forecast_cost(cfg.model_copy(update={"public_rows": 10**8}), dom)  # past the release cap: as many drawn
    assert declared.seconds > f1.seconds and declared.memory_mb > f1.memory_mb and "public row count" in declared.basis


def test_check_config_refuses_a_run_past_max_seconds_and_names_what_fits():
    dom = Domain(tuple("abcdefghijkl"), (12, 10, 9, 16, 15, 7, 15, 6, 5, 2, 6, 4))
    cfg = aim.Config(epsilon=1.0, max_model_size_mb=64.0, max_seconds=60.0)
    with pytest.raises(ValueError, match="above max_seconds=60") as err:
        aim.check_config(cfg, dom)
    message = str(err.value)
    suggestions = message.split("settings that fit: ")[1].split(", or raise")[0].split(", ")
    assert suggestions and all("=" in s for s in suggestions)
    for suggestion in suggestions:      # each suggestion alone passes
        field, value = suggestion.split("=")
        fixed = cfg.model_copy(update={field: type(getattr(cfg, field) or 1)(float(value))})
        assert aim.check_config(fixed, dom) is None
    with pytest.raises(ValueError, match="max_memory_gb"):
        aim.check_config(aim.Config(epsilon=1.0, max_memory_gb=0.01), dom)


def test_release_draws_at_most_what_max_release_mb_allows():
    codes, dom = toy_data(0, 4000)
    cap_rows = 300
    cfg = aim.Config(epsilon=1.0, max_release_mb=cap_rows * release_row_bytes(dom) / 2**20, **FAST)
    _, _, rel = run_toy(cfg, SeededNoise(2, "test-key"))
    assert rel.public_facts["sample_rows"] == cap_rows
    assert rel.points.shape[0] <= cap_rows


def test_the_release_cap_counts_a_byte_a_level_and_the_codes():
    """Points are 0/1, held as uint8; the cap counts a byte a level plus three int64 copies of the codes
    (hand-computed), so at 200 columns and 2,780 levels the default holds 141,654 records where 8 bytes a
    level at 256 MB held 12,069 (a release resampled by the rounding stage carries its own sampling error
    into every marginal)."""
    from privsynth.mechanisms.aim.cost import release_row_cap

    wide = Domain(tuple(f"c{j}" for j in range(200)), tuple([14] * 180 + [13] * 20))
    assert wide.width == 2780 and release_row_bytes(wide) == 2780 + 24 * 200
    assert release_row_cap(aim.Config(epsilon=1.0), wide) == 1024 * 2**20 // 7580 == 141_654
    assert 256 * 2**20 // (8 * 2780) == 12_069
    _, _, rel = run_toy(aim.Config(epsilon=1.0, **FAST), SeededNoise(2, "test-key"))
    assert rel.points.dtype == np.uint8
    assert rel.public_facts["sample_rows"] == round(rel.public_facts["n_estimate"])


def test_merged_objective_equals_the_sum_over_measurements():
    """The fit's loss and gradient, measurements of a clique merged, equal the plain sums."""
    rng = np.random.default_rng(11)
    sizes = (3, 2, 4)
    model = GraphicalModel(sizes, [(0, 1), (1, 2)], total=100.0)
    model.potentials = {c: rng.normal(0, 1, [sizes[a] for a in c]) for c in model.model_cliques}
    model.beliefs = model._calibrate(model.potentials)
    from privsynth.mechanisms.aim.model import NoisyMarginal

    ms = [NoisyMarginal((0, 1), rng.normal(15, 5, (3, 2)), 2.0), NoisyMarginal((0, 1), rng.normal(15, 5, (3, 2)), 3.0),
          NoisyMarginal((1,), rng.normal(50, 5, (2,)), 1.5, np.array([1.0, 3.0])),
          NoisyMarginal((1, 2), rng.normal(12, 4, (2, 4)), 2.5)]
    hosts = {m.clique: next(c for c in model.model_cliques if set(m.clique) <= set(c)) for m in ms}
    mu = model._model_marginals(model.beliefs)
    loss, grad = model._loss_and_grad(mu, model._objective(ms, hosts))
    expected_loss, expected_grad = 0.0, {c: np.zeros_like(v) for c, v in mu.items()}
    for m in ms:
        c = hosts[m.clique]
        var = m.sigma**2 * (1.0 if m.variance_scale is None else m.variance_scale)
        marg = mu[c].sum(axis=tuple(i for i, a in enumerate(c) if a not in m.clique))
        expected_loss += 0.5 * float(np.sum((marg - m.values) ** 2 / var))
        expected_grad[c] += ((marg - m.values) / var).reshape([sizes[a] if a in m.clique else 1 for a in c])
    assert loss == pytest.approx(expected_loss, rel=1e-12)
    for c in mu:
        np.testing.assert_allclose(grad[c], expected_grad[c], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- progress

def test_progress_hook_hears_every_round_with_public_facts_only(caplog):
    seen: list[RoundProgress] = []
    cfg = aim.Config(epsilon=1.0, **FAST)
    with caplog.at_level("DEBUG", logger="privsynth.mechanisms.aim"):
        with reporting_progress(seen.append):
            _, dom, rel = run_toy(cfg, SeededNoise(4, "test-key"))
    rounds = [p for p in seen if p.phase == "round"]
    assert len(rounds) == rel.public_facts["rounds"]
    assert [p.phase for p in seen[len(rounds):]] == ["final_fit", "sampling", "done"]
    for t, p in enumerate(rounds, start=1):
        assert p.rounds_done == t and t <= p.rounds_expected <= schedule.rounds_cap(cfg, dom.n_attributes)
        assert p.marginal == tuple(dom.names[a] for a in rel.public_facts["measured_marginals"][t - 1])
        assert p.sigma == rel.public_facts["sigmas"][t - 1]
        assert 0 < p.rho_spent <= 1 and p.eta_seconds is not None and p.eta_seconds >= 0
        # Only public scalars and names: nothing array-like that could carry counts or scores.
        assert all(isinstance(v, (str, int, float, tuple, type(None))) for v in vars(p).values())
    assert rounds[-1].rho_spent == pytest.approx(1.0) and rounds[-1].rounds_expected == rounds[-1].rounds_done
    # With a hook the caller shows each round; the log line is then DEBUG (not the same line twice at INFO).
    logged = [r for r in caplog.records if "aim round" in r.getMessage()]
    assert len(logged) == rel.public_facts["rounds"] and all(r.levelname == "DEBUG" for r in logged)
    assert "measured" in rounds[0].describe()


def test_a_failing_progress_hook_does_not_stop_the_release():
    def broken(_):
        raise RuntimeError("display gone")

    cfg = aim.Config(epsilon=0.5, **FAST)
    _, dom, rel = run_toy(cfg, SeededNoise(5, "test-key"))
    with reporting_progress(broken):
        _, _, rel2 = run_toy(cfg, SeededNoise(5, "test-key"))
    np.testing.assert_array_equal(rel.points, rel2.points)     # same release, hook or not
    calls = []
    codes, dom = toy_data(0)
    noise = SeededNoise(5, "test-key")
    noise.authorize("test")
    aim.run(aim.collect_statistics(Histogram.of_codes(codes), dom, cfg), dom, cfg, noise, progress=calls.append)
    assert calls and calls[-1].phase == "done"


def test_the_peeling_fallback_keeps_the_law_on_the_eligible_set(monkeypatch):
    """Every try of the rejection loop lands on an ineligible candidate (their scores are far above),
    so picks come from peeling: still softmax(scores / scale) over the eligible ones (20,000 draws;
    one rejection try instead of 25, to keep the test short: the law is the same either way)."""
    from privsynth.mechanisms.aim import selection

    monkeypatch.setattr(selection, "REJECTION_TRIES", 1)
    scores = np.array([40.0, 39.0, 41.0, 38.5] + [0.0, 1.0, 2.0, 0.5, -1.0] + [39.5] * 20)
    eligible = {4, 5, 6, 7, 8}
    scale = 0.8
    noise = SeededNoise(9, "test-key")
    noise.authorize("test")
    draws = 20000
    picks = np.array([select_eligible(scores, eligible.__contains__, noise, scale, 1.0) for _ in range(draws)])
    assert set(np.unique(picks)) <= eligible
    law = np.array([math.exp(scores[i] / scale) for i in sorted(eligible)])
    law /= law.sum()
    freq = np.array([np.mean(picks == i) for i in sorted(eligible)])
    assert np.all(np.abs(freq - law) <= 4 * np.sqrt(law * (1 - law) / draws) + 1e-12)
