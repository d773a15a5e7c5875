"""The forecast before the charge: hand-computed noise scales, warnings, and the CLI reading no data."""

from __future__ import annotations

import math

import pytest

from privsynth.privacy.accounting import PrivacyCost
from privsynth.report.forecast import forecast, order_forecast
from privsynth.schema.encoding import Domain


def test_gaussian_and_laplace_scales_by_hand():
    domain = Domain(("a", "b", "c"), (2, 3, 4))
    # zCDP: three 1-way marginals, L2 sensitivity sqrt(3): sigma = sqrt(3 / (2 rho)).
    o = order_forecast(domain, 1, rho=0.5, pure_epsilon=None, n=1000)
    assert o.noise == "gaussian" and o.noise_per_cell == pytest.approx(math.sqrt(3.0))
    assert o.mean_cells == pytest.approx(3.0)
    assert o.expected_tv_from_noise == pytest.approx(0.5 * 3.0 * math.sqrt(3.0) * math.sqrt(2 / math.pi) / 1000)
    # pure: three 2-way marginals, L1 sensitivity 3: b = 3 / epsilon.
    o = order_forecast(domain, 2, rho=0.5, pure_epsilon=1.0, n=1000)
    assert o.noise == "laplace" and o.noise_per_cell == pytest.approx(3.0)
    assert o.mean_cells == pytest.approx((6 + 8 + 12) / 3)


def test_a_pure_mechanism_on_a_small_table_is_warned_and_a_large_one_is_not():
    domain = Domain(tuple("abcdef"), (4,) * 6)
    small = forecast("reduced_space", PrivacyCost.pure(1.0, "t"), 1.0, None, domain, 1_000)
    assert any("2-way" in w for w in small.warnings)
    large = forecast("reduced_space", PrivacyCost.pure(1.0, "t"), 1.0, None, domain, 100_000_000)
    assert large.warnings == ()
    with pytest.raises(ValueError):
        forecast("reduced_space", PrivacyCost.pure(1.0, "t"), 1.0, None, domain, 0)


def test_the_forecast_command_reads_no_data_and_prints_plain_words(capsys):
    from privsynth.cli import main

    assert main(["forecast", "--public-rows", "48842", "--epsilon", "1", "--mechanism", "reduced_space"]) == 0
    out = capsys.readouterr().out
    assert "2-way" in out and "warning" in out and "Laplace: Dwork" in out


def test_a_saturated_forecast_never_says_the_noise_is_small():
    # Found on a first run: `privsynth forecast --public-rows 50000` said "about 1.0000 total-variation error per
    # marginal" for 3-way marginals and, two lines later, "no warning: the noise is small".
    from privsynth.report.forecast import format_forecast

    domain = Domain(tuple(f"c{i}" for i in range(15)), (16,) * 15)
    text = format_forecast(forecast("aim", PrivacyCost.zcdp(0.015, "t"), 1.0, 1e-9, domain, 50_000))
    assert "1.0000" not in text and "at its maximum of 1" in text
    assert "noise is small" not in text and "note:" in text
    small = Domain(("a", "b", "c"), (2, 2, 2))
    quiet = format_forecast(forecast("aim", PrivacyCost.zcdp(1.0, "t"), 10.0, 1e-9, small, 1_000_000))
    assert "no warning: the noise is small" in quiet and "note:" not in quiet
