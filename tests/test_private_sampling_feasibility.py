"""The user-facing feasibility report, against paper 002's Table 2 and the spec's constants
(practical_private_sampling.md sections 2.4 and 5)."""

import json
import math
from pathlib import Path

import pytest

from privsynth.mechanisms.private_sampling.feasibility import (
    feasibility_for_schema,
    feasibility_report,
    format_feasibility,
)
from privsynth.schema import load_schema

ADULT_SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "adult.yaml"

# Table 2 (eps = 1, d = 2, delta = 1/4, gamma = 1/8, Delta = 2^p ||f_n||_inf from Table 1):
# dataset, p, n, ||f_n||_inf, k bound * m^{3/4}, m lower bound, 2^{p/4} as printed
TABLE_2 = [
    ("Asia", 8, 20000, 2.9e-1, 7.3e-4, 2.2e10, 4),
    ("Mushroom", 119, 8124, 1 / 8124, 1.1e-49, 5.3e72, 9.0e8),
    ("Car", 25, 1727, 5.8e-4, 2.9e-8, 1.4e16, 77),
    ("Adult", 62, 32561, 1.8e-2, 9.5e-27, 1.5e42, 46340),
]


@pytest.mark.parametrize("name,p,n,f_inf,k_coef,m_lb,m_ub", TABLE_2)
def test_reproduces_table_2(name, p, n, f_inf, k_coef, m_lb, m_ub):
    # m = 1 gives the coefficient c in "k <= c / m^{3/4}"; the paper rounded ||f_n||_inf and used
    # binom(p, <=2) ~ p(p+1)/2, so agreement is to a few percent (spec section 5.2).
    r = feasibility_report(p, 2, n, 1.0, m=1, delta_box=0.25, Delta_box=2.0 ** p * f_inf, gamma=1 / 8,
                           conservative=False)
    assert r["theorem_12_2"]["k_bound_paper_constant"] == pytest.approx(k_coef, rel=0.05)
    assert r["m_theory"]["theorem_12_4_lower"] == pytest.approx(m_lb, rel=0.05)
    upper = r["m_theory"]["theorem_12_4_upper_2_pow_p_over_4"]
    assert upper == pytest.approx(m_ub, rel=0.02)  # Car prints 77 for 76.1, Adult 46340 for 46340.95
    assert not r["m_theory"]["theorem_12_4_range_nonempty"]  # the paper's conclusion: inconsistent m bounds
    assert r["m_theory"]["theorem_12_4_lower"] > 2.0 ** p  # and the lower bound exceeds 2^p


def test_closed_form_constants():  # section 5.1
    for p, N in [(8, 37), (25, 326), (46, 1082), (62, 1954), (119, 7141)]:
        assert feasibility_report(p, 2, 1e6, 1.0)["walsh_features_N"] == N
    r = feasibility_report(25, 2, 1e6, 1.0, Delta_box=3.0, m=1000, conservative=False)
    assert r["m_theory"]["theorem_12_4_lower"] == pytest.approx(111_817.01 * 9 * 326, rel=1e-6)
    assert r["theorem_12_2"]["k_bound"] == pytest.approx(
        8.12906e-3 * 1e3 / (3.0 ** 1.5 * 326 ** 0.25 * 1000 ** 0.75), rel=1e-5)
    # Asia at m = 256 (exact binom): k_max = 1.14e-5
    asia = feasibility_report(8, 2, 20000, 1.0, m=256, Delta_box=74.24, conservative=False)
    assert asia["theorem_12_2"]["k_bound"] == pytest.approx(1.14e-5, rel=0.01)
    # ideal case, eps = 10, n = 2^p, Delta = 1 (outside Lemma 12.1's region, but the formula is the paper's)
    N46 = 1082
    m_lb = 111_817.01 * N46
    ideal = feasibility_report(46, 2, 2.0 ** 46, 10.0, m=math.ceil(m_lb), Delta_box=1.0, conservative=False)
    assert ideal["theorem_12_2"]["k_bound"] == pytest.approx(0.103, rel=0.02)
    assert not ideal["theorem_12_2"]["applicable"]


def test_adult_schema_rows_allowed():
    schema = load_schema(ADULT_SCHEMA)
    at1 = feasibility_for_schema(schema, 48_842, 1.0)
    assert at1["inputs"]["p"] == 50 and at1["walsh_features_N"] == 1276
    assert at1["k_allowed"] == 0 and at1["verdict"] == "infeasible" and at1["binding_bound"] == "box"
    at3 = feasibility_for_schema(schema, 48_842, 3.0)
    assert at3["k_allowed"] == 1 and at3["verdict"] == "feasible" and at3["n_needed"]["any_n_works"]
    assert at3["theorem_12_2"]["k_allowed"] == 0
    assert not at3["accuracy"]["hypotheses_met_except_density"]
    too_many = feasibility_for_schema(schema, 48_842, 3.0, k=100)
    assert too_many["verdict"] == "infeasible" and "100 rows requested" in too_many["reasons"][0]
    # 100 rows need an n the Theorem 12.2 path can only give at astronomical sizes
    assert too_many["n_needed"]["combined"] > 1e15
    for r in (at1, at3, too_many):
        json.dumps(r, allow_nan=False)
        text = format_feasibility(r)
        assert r["verdict"].upper() in text and "rows allowed" in text
    assert "options" in format_feasibility(at1)


def test_report_is_pure_and_validates():
    a = feasibility_report(12, 2, 1e6, 2.5, k_requested=1)
    assert a == feasibility_report(12, 2, 1e6, 2.5, k_requested=1)
    assert a["k_allowed"] == 1 and a["epsilon_used"] == pytest.approx(a["epsilon_per_row"])
    with pytest.raises(ValueError):
        feasibility_report(0, 2, 1e6, 1.0)
    with pytest.raises(ValueError):
        feasibility_report(10, 2, 1e6, 1.0, k_requested=0)
    with pytest.raises(ValueError):
        feasibility_report(10, 2, 1e6, 1.0, gamma=2.0)
