"""One home for privacy arithmetic (issue 39.2): the conversions between a privacy cost and a noise scale
live in privsynth/privacy/accounting.py, checked here against hand-computed values, and no module outside
privsynth/privacy writes one out (a scan of the code, strings and comments blanked)."""

from __future__ import annotations

import io
import math
import re
import tokenize
from pathlib import Path

import pytest

from privsynth.privacy.accounting import (
    exponential_epsilon,
    exponential_rho,
    gaussian_rho,
    gaussian_sigma,
    gumbel_scale,
    laplace_scale,
    noisy_max_scale,
    rho_from_pure_epsilon,
)

ROOT = Path(__file__).resolve().parents[1]


def test_gaussian_by_hand():
    assert gaussian_sigma(0.02) == 5.0                     # 1 / sqrt(2 * 0.02)
    assert gaussian_sigma(0.5) == pytest.approx(1.0)
    assert gaussian_sigma(0.5, math.sqrt(2.0)) == pytest.approx(math.sqrt(2.0))   # sensitivity^2 = 2
    assert gaussian_sigma(0.125, 3.0) == pytest.approx(6.0)                      # 3 / sqrt(0.25)
    assert gaussian_rho(2.0) == 0.125                      # 1 / (2 * 2^2)
    assert gaussian_rho(10.0) == 0.005
    assert gaussian_rho(1.0, 3.0) == 4.5                   # 3^2 / 2
    for rho in (1e-6, 0.0123, 0.5, 7.0):
        for sensitivity in (1.0, math.sqrt(2.0), 15.0):
            assert gaussian_rho(gaussian_sigma(rho, sensitivity), sensitivity) == pytest.approx(rho, rel=1e-14)


def test_exponential_mechanism_by_hand():
    assert exponential_rho(0.4) == pytest.approx(0.02, rel=1e-15)   # 0.4^2 / 8
    assert exponential_rho(2.0) == 0.5
    assert exponential_epsilon(0.02) == pytest.approx(0.4, rel=1e-15)
    assert exponential_epsilon(0.5) == 2.0                 # sqrt(8 * 0.5)
    for rho in (1e-6, 0.0123, 0.5, 7.0):
        assert exponential_rho(exponential_epsilon(rho)) == pytest.approx(rho, rel=1e-14)
    # bounded range: a quarter of a general pure eps-DP release's eps^2 / 2
    assert exponential_rho(0.7) == pytest.approx(rho_from_pure_epsilon(0.7) / 4.0, rel=1e-15)


def test_noisy_max_and_laplace_scales_by_hand():
    assert noisy_max_scale(1.0) == 2.0                     # 2 * 1 / 1
    assert noisy_max_scale(0.5, 3.0) == 12.0               # 2 * 3 / 0.5
    assert gumbel_scale(0.125) == 2.0                      # 1 / sqrt(2 * 0.125)
    for rho in (1e-6, 0.0123, 0.5, 7.0):                   # rho-zCDP noisy max: eps = sqrt(8 rho)
        assert gumbel_scale(rho, 2.0) == pytest.approx(noisy_max_scale(exponential_epsilon(rho), 2.0), rel=1e-15)
        assert gumbel_scale(rho) == gaussian_sigma(rho)    # one scale where a mechanism selects and measures
    assert laplace_scale(0.5) == 2.0
    assert laplace_scale(0.5, 6) == 12.0                   # 6 / 0.5
    assert laplace_scale(1.0, 105) == 105.0


@pytest.mark.parametrize("call", [
    lambda: gaussian_sigma(0.0), lambda: gaussian_sigma(-1.0), lambda: gaussian_sigma(math.inf),
    lambda: gaussian_sigma(0.1, 0.0), lambda: gaussian_sigma(True), lambda: gaussian_rho(0.0),
    lambda: gaussian_rho(1.0, -2.0), lambda: exponential_rho(math.nan), lambda: exponential_epsilon(0.0),
    lambda: noisy_max_scale(0.0), lambda: noisy_max_scale(1.0, 0.0), lambda: gumbel_scale(-0.1),
    lambda: laplace_scale(0.0), lambda: laplace_scale(1.0, -1.0), lambda: laplace_scale("1"),
])
def test_invalid_inputs_are_refused(call):
    with pytest.raises(ValueError):
        call()


# Written-out conversions: rho <-> sigma, eps <-> rho, noise scales from eps. Each names what to call instead.
CONVERSIONS = {
    "gaussian_sigma (sqrt(D^2 / (2 rho)))": r"sqrt\(\s*[\w.]*(\s*\*\*\s*2)?\s*/\s*\(\s*2(\.0)?\s*\*",
    "gaussian_sigma (D / sqrt(2 rho))": r"/\s*(math\.|np\.)?sqrt\(\s*2(\.0)?\s*\*\s*[\w.]*rho",
    "gaussian_sigma (1 / sqrt(2 ...))": r"\b1(\.0)?\s*/\s*(math\.|np\.)?sqrt\(\s*2(\.0)?\s*\*",
    "gaussian_rho (D^2 / (2 sigma^2))": r"/\s*\(\s*2(\.0)?\s*\*\s*([\w.]*sigma|[\w.]+\s*\*\*\s*2\b)",
    "exponential_rho (eps^2 / 8)": r"\*\*\s*2\s*/\s*8",
    "exponential_epsilon (sqrt(8 rho))": r"sqrt\(\s*8(\.0)?\s*\*",
    "rho_from_pure_epsilon (eps^2 / 2)": r"eps\w*\s*(\*\*\s*2|\*\s*[\w.]*eps\w*)\s*/\s*2",
    "noisy_max_scale (2 D / eps)": r"\b2(\.0)?\s*\*\s*[\w.]+\s*/\s*[\w.]*eps",
    "laplace_scale (D / eps)": r"(sensitivity\w*(\([^()]*(\([^()]*\))?[^()]*\))?|\b1(\.0)?)\s*/\s*[\w.]*eps",
}


def code_lines(text: str) -> list[str]:
    """The lines of a Python source with its strings (docstrings, f-string text) and comments blanked."""
    lines = [list(line) for line in text.splitlines()]
    blanked = {tokenize.STRING, tokenize.COMMENT}
    if hasattr(tokenize, "FSTRING_MIDDLE"):  # Python 3.12: an f-string's literal parts
        blanked.add(tokenize.FSTRING_MIDDLE)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in blanked:
            (row0, col0), (row1, col1) = tok.start, tok.end
            for row in range(row0, row1 + 1):
                line = lines[row - 1]
                for col in range(col0 if row == row0 else 0, col1 if row == row1 else len(line)):
                    if col < len(line):
                        line[col] = " "
    return ["".join(line) for line in lines]


def written_out(code: str) -> list[str]:
    return [name for name, pattern in CONVERSIONS.items() if re.search(pattern, code)]


def written_out_conversions(root: Path) -> list[str]:
    found = []
    privacy = root / "privsynth" / "privacy"
    for path in sorted((root / "privsynth").rglob("*.py")):
        if privacy in path.parents:
            continue
        for number, line in enumerate(code_lines(path.read_text(encoding="utf-8")), 1):
            if not line.strip().startswith("#"):
                found += [f"{path.relative_to(root)}:{number}: {name}: {line.strip()}" for name in written_out(line)]
    return found


@pytest.mark.parametrize("code", [
    "sigma = math.sqrt(1.0 / (2.0 * rho))", "return math.sqrt(s**2 / (2.0 * rho))",
    "return math.sqrt(m / (2.0 * self.rho))",
    "scale = 1.0 / math.sqrt(2.0 * rho0)", "return sensitivity / math.sqrt(2.0 * rho)",
    "return sensitivity**2 / (2.0 * sigma**2)", "if rho <= d / (2.0 * initial**2):", "used = 1 / (2 * s.sigma)",
    "return epsilon**2 / 8.0", "eps = math.sqrt(8.0 * 0.1 * budget)", "rho_d = eps_d**2 / 2.0",
    "rho = eps * eps / 2", "scale = 2.0 * delta_q / eps", "noise.add_laplace(counts, 1.0 / eps_w)",
    "scale = mm.centroid_l1_sensitivity(q, b) / eps_c", "return l1_sensitivity(marginals) / epsilon",
])
def test_the_scan_flags_a_written_out_conversion(code):
    assert written_out(code)


@pytest.mark.parametrize("code", [
    "sigma = gaussian_sigma(rho * CLASS_SHARE)", "return gaussian_sigma(self.rho, math.sqrt(m))",
    "s = sigma * math.sqrt(factor)", "return a.sigma / math.sqrt(2.0)", "mean_abs = scale * math.sqrt(2.0 / math.pi)",
    "if cells[best] <= (math.sqrt(2.0 * math.log(len(cells))) + 1.0) * sigma:", "mu = gap / (2 * (m + 1))",
    "tv = [size * scale / (2 * n_public) for size in sizes]", "return math.sqrt(m) / (2.0 * math.exp(d))",
    "w = 1.0 / (m.sigma**2 * m.variance_scale)", "limit = eligible.size_limit * 2**20 / 8", "beta = epsilon / t",
    "threshold = config.count_threshold / eps_w", "x = (2.0 * noise_l1 + fit_l1) / (2.0 * (total - noise_l1))",
])
def test_the_scan_leaves_other_arithmetic_alone(code):
    assert not written_out(code)


def test_code_lines_blank_strings_and_comments():
    text = 'x = 1  # sqrt(8 * rho)\n"""eps**2 / 8\nsqrt(T / (2 * rho))"""\ny = f"{a} 1 / sqrt(2 * rho) {b}"\n'
    lines = code_lines(text)
    assert len(lines) == 4 and not any(written_out(line) for line in lines)
    assert lines[0].rstrip() == "x = 1" and lines[3].startswith("y = ")


def test_no_module_outside_privacy_writes_out_a_conversion():
    found = written_out_conversions(ROOT)
    assert not found, ("privacy arithmetic written out; call privsynth.privacy.accounting instead:\n"
                       + "\n".join(found))
