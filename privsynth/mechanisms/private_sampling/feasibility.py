"""Can private sampling release the rows a user wants? A pure, JSON-serialisable report.

For a dataset's p (compact-binary bits), d, n (a row count the user declares public; never read from
the data) and epsilon it gives:
the largest k the guarantee allows (and which bound binds), the n needed for the requested k, the m the
theory asks for ([PS] Thm 12.4, Prop 9.3, rule of thumb e^{2d} N), the accuracy theorem's n and k, and a
verdict. It reproduces Table 2 of Pierquin, Zimmermann & Boussard ("Practical considerations on using
private sampling for synthetic data", 2023; spec docs/specs/practical_private_sampling.md section 2.4). Nothing here
reads data: every input is public.
"""

from __future__ import annotations

import math

from privsynth.mechanisms.private_sampling import bounds as bounds
from privsynth.schema import Schema
from privsynth.schema.encoding import domain_of

DEFAULT_M_FACTOR = 8.0  # the mechanism's default: m = ceil(8 N)


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def feasibility_report(p: int, d: int, n: float, epsilon: float, k_requested: int | None = None, *,
                       m: int | None = None, m_factor: float = DEFAULT_M_FACTOR, delta_box: float = 0.25,
                       Delta_box: float = 2.0, gamma: float = 0.125, conservative: bool = True,
                       slack: float | None = None) -> dict:
    """The feasibility of private sampling for a dataset of p bits and n rows at epsilon (pure DP).

    m: the reduced-space size (default ceil(m_factor * N), the mechanism's default). delta_box and
    Delta_box: the paper's delta and Delta. gamma: the failure probability in the accuracy theorem
    (1/8 as in paper 002). conservative: the Lemma 10.1 constant 18 instead of 4. slack: extra epsilon
    per row for numerical normalisation (default: the mechanism's, ``numerical_slack()``).
    """
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"p must be an integer >= 1, got {p!r}")
    if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= p:
        raise ValueError(f"d must be an integer in [1, p], got {d!r}")
    if k_requested is not None and (isinstance(k_requested, bool) or not isinstance(k_requested, int)
                                    or k_requested < 1):
        raise ValueError(f"k_requested must be an integer >= 1, got {k_requested!r}")
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must be in (0, 1), got {gamma!r}")
    slack = bounds.numerical_slack() if slack is None else slack
    N = bounds.binom_le(p, d)
    m = m if m is not None else math.ceil(m_factor * N)
    lemma_ok = bounds.lemma_12_1_applicable(delta_box, Delta_box)
    per, binding = bounds.per_sample_epsilon(delta_box, Delta_box, n, m, p, d, conservative, slack)
    k_allowed = bounds.k_max_combined(epsilon, delta_box, Delta_box, n, m, p, d, conservative, slack)
    k_target = k_requested if k_requested is not None else 1
    e2d = math.exp(2 * d)
    m_lower_thm = 16.0 / (delta_box ** 2 * gamma) * Delta_box ** 2 * e2d * N
    m_upper_thm = 2.0 ** (p / 4.0)
    n_acc = 16.0 / (delta_box ** 2 * gamma) * e2d * N
    k_acc = 4.0 / delta_box ** 2 * (math.log(2.0 / gamma) + math.log(N))

    reasons = []
    if k_allowed == 0:
        reasons.append(f"no row can be released: one row costs {per:.4f} > epsilon={epsilon:g}")
    elif k_requested is not None and k_requested > k_allowed:
        reasons.append(f"{k_requested} rows requested but at most {k_allowed} allowed at epsilon={epsilon:g}")
    verdict = "infeasible" if reasons else "feasible"
    accuracy_ok = n >= n_acc and m_lower_thm <= m <= m_upper_thm and k_target >= k_acc and k_target <= k_allowed
    n_needed = bounds.n_needed_combined(k_target, epsilon, m, p, d, delta_box, Delta_box, conservative, slack)
    notes = [
        "private sampling adds no noise: each released row costs epsilon_per_row, so the row count is capped",
        f"per-row cost = ln(min(Delta/delta, 1 + eta m / delta)) + {slack:.1e} (numerical slack); the box term "
        f"ln(Delta/delta) = {math.log(Delta_box / delta_box):.4f} holds for every n",
        "Lemma 10.1 constant 18 (conservative; the paper states 4)" if conservative else
        "Lemma 10.1 constant 4 as the paper states (spec flags a possible factor 4.5)",
    ]
    if not lemma_ok:
        notes.append("Lemma 12.1 does not apply to this box (needs delta < 1/2, Delta + delta > 2, delta(4 Delta - 3) "
                     "<= Delta); only the box bound is used")
    if m_lower_thm > m_upper_thm:
        notes.append("the accuracy theorem's m range is empty (lower bound > 2^(p/4)): no accuracy guarantee is "
                     "possible")
    return {
        "inputs": {"p": p, "d": d, "n": float(n), "epsilon": float(epsilon), "k_requested": k_requested,
                   "m": int(m), "delta_box": float(delta_box), "Delta_box": float(Delta_box), "gamma": float(gamma),
                   "conservative_lemma_10_1": bool(conservative)},
        "walsh_features_N": N,
        "k_allowed": k_allowed,
        "binding_bound": binding,
        "epsilon_per_row": per,
        "epsilon_used": k_allowed * per if k_requested is None else min(k_requested, k_allowed) * per,
        "k_allowed_box": bounds.k_max_box(epsilon, delta_box, Delta_box),
        "theorem_12_2": {
            "applicable": lemma_ok,
            "k_allowed": bounds.k_max_theorem_12_2(epsilon, n, m, p, d, delta_box, Delta_box, conservative),
            "k_bound": bounds.k_bound_theorem_12_2(epsilon, n, m, p, d, delta_box, Delta_box, conservative),
            "k_bound_paper_constant": bounds.k_bound_theorem_12_2(epsilon, n, m, p, d, delta_box, Delta_box, False),
            "eta": bounds.eta_lemma_12_1(n, m, p, d, delta_box, Delta_box, conservative),
            "n_needed_for_k": bounds.n_needed_theorem_12_2(k_target, epsilon, m, p, d, delta_box, Delta_box,
                                                           conservative),
        },
        "n_needed": {"k": k_target, "combined": _finite_or_none(n_needed),
                     "any_n_works": n_needed == 0.0},
        "m_theory": {
            "rule_of_thumb_e2d_N": e2d * N,
            "proposition_9_3_lower": 16.0 / gamma ** 2 * e2d * N,
            "theorem_12_4_lower": m_lower_thm,
            "theorem_12_4_upper_2_pow_p_over_4": m_upper_thm,
            "theorem_12_4_range_nonempty": m_lower_thm <= m_upper_thm,
            "well_conditioned_in_practice": 2 * N,
        },
        "accuracy": {
            "marginal_error_bound": 4 * delta_box,
            "probability_at_least": max(0.0, 1 - 4 * gamma - 2.0 ** (-p / 2)),
            "n_needed_theorem_12_4": n_acc,
            "k_needed_theorem_12_4": k_acc,
            "requires_density_bound": f"||f||_inf <= Delta / 2^p (data not more concentrated than {Delta_box:g} x "
                                      "uniform)",
            "hypotheses_met_except_density": bool(accuracy_ok),
        },
        "verdict": verdict,
        "reasons": reasons,
        "notes": notes,
    }


def feasibility_for_schema(schema: Schema, n: float, epsilon: float, k: int | None = None, d: int = 2,
                           **kwargs) -> dict:
    """``feasibility_report`` with p = the schema's compact-binary width (the encoding private sampling uses)."""
    p = domain_of(schema).binary_width
    report = feasibility_report(p, d, n, epsilon, k, **kwargs)
    report["schema"] = schema.name
    return report


def _g(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def format_feasibility(report: dict) -> str:
    """A short human-readable summary of ``feasibility_report``."""
    i = report["inputs"]
    t = report["theorem_12_2"]
    mt = report["m_theory"]
    acc = report["accuracy"]
    nn = report["n_needed"]
    head = "private_sampling feasibility" + (f" for schema {report['schema']!r}" if "schema" in report else "")
    lines = [
        head,
        f"  p = {i['p']} bits, d = {i['d']}, N = {report['walsh_features_N']} Walsh features, n = {i['n']:.6g}, "
        f"epsilon = {i['epsilon']:g}, box [delta, Delta] = [{i['delta_box']:g}, {i['Delta_box']:g}], m = {i['m']}",
        f"  verdict: {report['verdict'].upper()}" + (f" ({'; '.join(report['reasons'])})" if report["reasons"] else ""),
        f"  rows allowed: {report['k_allowed']} (each costs {report['epsilon_per_row']:.4f}; binding bound: "
        f"{report['binding_bound']})",
        f"    box bound alone: {report['k_allowed_box']};  Theorem 12.2 alone: {t['k_allowed']} "
        f"(real-valued bound {_g(t['k_bound'])})",
        f"  n needed for {nn['k']} row(s): " + ("any n (the box bound suffices)" if nn["any_n_works"] else
                                                f"{_g(nn['combined'])} (Theorem 12.2: {_g(t['n_needed_for_k'])})"),
        f"  m the theory asks for: Thm 12.4 >= {_g(mt['theorem_12_4_lower'])} and <= 2^(p/4) = "
        f"{_g(mt['theorem_12_4_upper_2_pow_p_over_4'])}; Prop 9.3 >= {_g(mt['proposition_9_3_lower'])}; "
        f"rule of thumb e^(2d) N = {_g(mt['rule_of_thumb_e2d_N'])}; in practice ~2N = "
        f"{mt['well_conditioned_in_practice']} is well conditioned",
        f"  accuracy theorem (all marginals within {acc['marginal_error_bound']:g} w.p. >= "
        f"{acc['probability_at_least']:.3g}): needs n >= {_g(acc['n_needed_theorem_12_4'])}, k >= "
        f"{_g(acc['k_needed_theorem_12_4'])}; hypotheses met: {acc['hypotheses_met_except_density']}",
    ]
    if report["verdict"] == "infeasible":
        lines.append("  options: fewer rows, a larger epsilon, a narrower box, or another mechanism "
                     "(reduced_space or rap, whose row count is free post-processing)")
    lines += [f"  note: {n}" for n in report["notes"]]
    return "\n".join(lines)
