"""The noise source meters itself (issue 39.3): every privacy draw is priced from its scale and stated
sensitivity against the charge that authorised it, and a draw past the charge raises InternalError before
it is made. Prices against hand-computed values; every mechanism and the discover stage, run through the
pipeline, spend exactly what they charged; a mechanism broken to draw less noise is stopped."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import TOY_SCHEMA, toy_frame

import privsynth
from privsynth.errors import InternalError
from privsynth.privacy import charged
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.meter import Price, gaussian_price, laplace_price, noisy_max_price, price_of, pure_price
from privsynth.privacy.noise import SeededNoise
from privsynth.schema import parse_schema


def metered(allowance: PrivacyCost | None) -> SeededNoise:
    noise = SeededNoise(0, "meter-test")
    noise.authorize("test charge", allowance)
    return noise


def test_prices_are_the_textbook_costs():
    assert gaussian_price(2.0, 1.0) == Price(1 / 8, None)  # Delta^2 / (2 sigma^2)
    assert gaussian_price(3.0, math.sqrt(2.0)).rho == pytest.approx(2 / 18)
    assert laplace_price(4.0, 2.0) == Price(0.125, 0.5)  # eps = Delta / b; rho = eps^2 / 2
    assert noisy_max_price(2.0, 1.0) == Price(1 / 8, 1.0)  # eps = 2 Delta / b; rho = eps^2 / 8 (bounded range)
    assert noisy_max_price(2.0, 1.0, picks=3) == Price(3 / 8, 3.0)
    assert pure_price(0.5) == Price(0.125, 0.5)
    assert price_of(PrivacyCost.pure(2.0, "x")) == Price(2.0, 2.0)


def test_draws_inside_the_charge_pass_and_the_one_past_it_is_refused_before_it_is_made():
    noise = metered(PrivacyCost.zcdp(0.25, "two draws at sigma 2"))
    noise.add_gaussian(np.zeros(5), 2.0, sensitivity=1.0)
    noise.gaussian(2.0, 3, sensitivity=1.0)
    assert noise.meter.rho == pytest.approx(0.25)
    state = noise._rng.bit_generator.state
    with pytest.raises(InternalError, match="past its charge"):
        noise.add_gaussian(np.zeros(5), 2.0, sensitivity=1.0)
    assert noise._rng.bit_generator.state == state  # nothing was drawn
    assert noise.meter.rho == pytest.approx(0.25)


def test_a_larger_sensitivity_costs_more_and_a_pure_charge_never_pays_for_gaussian_noise():
    noise = metered(PrivacyCost.zcdp(0.25, "one draw"))
    with pytest.raises(InternalError):
        noise.add_gaussian(np.zeros(2), 2.0, sensitivity=2.0)  # rho 0.5
    pure = metered(PrivacyCost.pure(1.0, "laplace"))
    pure.add_laplace(np.zeros(3), 2.0, sensitivity=1.0)  # eps 0.5
    pure.laplace(4.0, 2, sensitivity=2.0)  # eps 0.5
    with pytest.raises(InternalError, match="pure-DP"):
        pure.add_laplace(np.zeros(3), 100.0, sensitivity=1.0)
    gaussian_in_pure = metered(PrivacyCost.pure(10.0, "laplace only"))
    with pytest.raises(InternalError, match="never pure DP"):
        gaussian_in_pure.add_gaussian(np.zeros(3), 100.0, sensitivity=1.0)


def test_top_k_costs_k_selections():
    noise = metered(PrivacyCost.zcdp(2 / 8, "two selections"))
    noise.noisy_top_k(np.arange(5.0), 2.0, 2, sensitivity=1.0)
    with pytest.raises(InternalError):
        noise.noisy_max(np.arange(5.0), 2.0, sensitivity=1.0)


def test_a_scope_pays_its_price_once_whatever_it_draws():
    noise = metered(PrivacyCost.zcdp(1 / 8, "one selection"))
    with noise.one_release(noisy_max_price(2.0, 1.0)):
        for _ in range(30):  # a redrawing selection: one pick leaves it
            noise.noisy_max(np.arange(5.0), 2.0, sensitivity=1.0)
        noise.noisy_top_k(np.arange(5.0), 2.0, 4, sensitivity=1.0)
    assert noise.meter.rho == pytest.approx(1 / 8)
    with pytest.raises(InternalError):
        with noise.one_release(noisy_max_price(2.0, 1.0)):
            pass
    sampler = metered(PrivacyCost.pure(0.5, "a sampler"))
    with sampler.one_release(pure_price(0.5)):
        sampler.gaussian(1.0, 10)  # a sampler's proposals: no sensitivity, its law is the proof
        sampler.choice(np.full(4, 0.25), 2)


def test_an_unpriced_draw_is_refused_where_a_charge_is_metered():
    noise = metered(PrivacyCost.zcdp(1.0, "x"))
    with pytest.raises(InternalError, match="states no sensitivity"):
        noise.add_gaussian(np.zeros(2), 1.0)
    with pytest.raises(InternalError, match="states no sensitivity"):
        noise.choice(np.full(2, 0.5), 1)
    free = metered(None)  # the privacy audit's own sources: counted, not checked
    free.add_gaussian(np.zeros(2), 1.0)
    assert free.meter.draws == 1


# ---------------------------------------------------------------- every mechanism and discovery, through the run

@pytest.fixture
def sources(monkeypatch):
    """Every noise source the pipeline makes (``charge_then_noise``), with the cost it was authorised for."""
    made: list = []
    real = charged.make_noise_source

    def capture(*args, **kwargs):
        noise = real(*args, **kwargs)
        made.append(noise)
        return noise

    monkeypatch.setattr(charged, "make_noise_source", capture)
    return made


RUNS = {
    "aim": dict(options={"max_rounds": 4, "iterations_per_round": 10, "final_iterations": 20}),
    "rap": dict(options={"rounds": 2, "picks_per_round": 1, "max_iterations": 20}),
    "reduced_space": dict(options={"points_per_statistic": 2.0}),
    "microaggregation": dict(),
    "private_sampling": dict(epsilon=6.0, rows=1),
}


@pytest.mark.parametrize("mechanism", sorted(RUNS))
def test_every_mechanism_draws_exactly_its_charge(mechanism, sources, tmp_path):
    settings = {"epsilon": 1.0, "rows": 40, **RUNS[mechanism]}
    schema = parse_schema(TOY_SCHEMA)
    privsynth.synthesize(toy_frame(400), schema, mechanism=mechanism, unlimited=True, seed=3,
                         ledger=f"sqlite:///{tmp_path / 'ledger.db'}", release_store=tmp_path / "store",
                         output=tmp_path / "run", **settings)
    (noise,) = sources
    allowance = noise.meter.allowance
    assert noise.meter.checked and noise.meter.draws >= 1
    if allowance.pure_epsilon is None:  # zCDP: the rhos add up to the charge
        assert noise.meter.rho == pytest.approx(allowance.rho, rel=1e-9)
    else:  # pure DP: the epsilons add up to it (their rhos, eps_i^2 / 2 each, to less than the charge's eps^2 / 2)
        assert noise.meter.pure_epsilon == pytest.approx(allowance.pure_epsilon, rel=1e-9)
        assert noise.meter.rho <= allowance.rho


def test_the_discover_stage_draws_exactly_its_charge(sources, tmp_path):
    release = privsynth.synthesize(toy_frame(600).drop(columns=["id"]), None, epsilon=1.0, unlimited=True, seed=3,
                                   ledger=f"sqlite:///{tmp_path / 'ledger.db'}", release_store=tmp_path / "store",
                                   output=tmp_path / "run", options={"max_rounds": 12, "iterations_per_round": 10,
                                                                     "final_iterations": 20})
    discovery, mechanism = sources
    assert discovery.meter.rho == pytest.approx(release.privacy["run_total"]["parts"]["discovery_rho"], rel=1e-9)
    assert mechanism.meter.rho == pytest.approx(release.privacy["run_total"]["parts"]["mechanism_rho"], rel=1e-9)


def test_a_mechanism_broken_to_draw_less_noise_is_stopped(monkeypatch, tmp_path):
    """The attack: a mechanism whose noise is half what its charge paid for. The meter refuses its first
    draw past the charge; no release is stored or written."""
    from privsynth.mechanisms.reduced_space import mechanism as reduced_space

    real = reduced_space.laplace_scale
    monkeypatch.setattr(reduced_space, "laplace_scale", lambda epsilon, marginals: real(epsilon, marginals) / 2)
    with pytest.raises(InternalError, match="past its"):
        privsynth.synthesize(toy_frame(200), parse_schema(TOY_SCHEMA), mechanism="reduced_space", epsilon=1.0,
                             rows=20, unlimited=True, seed=1, ledger=f"sqlite:///{tmp_path / 'ledger.db'}",
                             release_store=tmp_path / "store", output=tmp_path / "run",
                             options={"points_per_statistic": 2.0})
    assert not (tmp_path / "run" / "release.parquet").exists()
