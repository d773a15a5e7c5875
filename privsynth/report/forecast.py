"""A forecast before the charge: what noise a release will carry, from public facts alone.

Inputs are the schema (public), the mechanism's config (epsilon, delta, options) and a row count the
user states as public knowledge (an approximate n is enough). No data is read, so the forecast costs
nothing and may be shown anywhere.

What it says, per marginal order k = 1, 2, 3 (every k-way marginal of the schema's binning):
* the noise per cell if the whole budget were spent measuring all k-way marginals once: Gaussian
  sigma = sqrt(M_k / (2 rho)) for zCDP mechanisms (M_k marginals, L2 sensitivity sqrt(M_k) under
  add/remove one record), Laplace b = M_k / epsilon for pure ones (L1 sensitivity M_k);
* the total-variation error that noise alone puts on an average k-way marginal:
  0.5 * cells * E|noise| / n, with E|noise| = sigma sqrt(2/pi) (Gaussian) or b (Laplace).
Adaptive mechanisms (aim, rap) measure a few marginals with more budget each, so they do better than
the all-at-once figure on what they measure; the figure is the scale to expect, not a promise.
The warning compares it with the typical error of the independent-columns model on real tables
(about 0.05 on 2-way and 0.15 on 3-way marginals; on Adult 0.09 and 0.17): a mechanism whose noise
alone is larger is likely to lose to that model. [1] Bun & Steinke 2016 (zCDP, Gaussian mechanism);
[2] Dwork et al. 2006 (Laplace mechanism); [3] McKenna et al. 2022 (AIM's adaptive measurements).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import combinations

from privsynth.privacy.accounting import gaussian_sigma, laplace_scale
from privsynth.schema.encoding import Domain

TYPICAL_INDEPENDENT_TV = {1: 0.0, 2: 0.05, 3: 0.15}
# Mechanisms that select what to measure, spending more budget on fewer marginals than all-at-once.
ADAPTIVE = {"aim", "rap"}


@dataclass(frozen=True)
class OrderForecast:
    k: int
    marginals: int
    mean_cells: float
    noise: str
    noise_per_cell: float
    expected_tv_from_noise: float


@dataclass(frozen=True)
class Forecast:
    mechanism: str
    epsilon: float
    delta: float | None
    rho: float
    public_rows: int
    width: int
    largest_marginal_cells: int
    histogram_rows_at_most: int
    orders: tuple[OrderForecast, ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...] = ()
    # The mechanism's own forecast of its run (seconds, memory_mb, basis), where it has one (aim).
    cost: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


def order_forecast(domain: Domain, k: int, rho: float, pure_epsilon: float | None, n: int) -> OrderForecast:
    marginals = list(combinations(range(domain.n_attributes), k))
    cells = [math.prod(domain.sizes[a] for a in m) for m in marginals]
    count = len(marginals)
    if pure_epsilon is not None:
        scale, kind = laplace_scale(pure_epsilon, count), "laplace"
        mean_abs = scale
    else:
        scale, kind = gaussian_sigma(rho, math.sqrt(count)), "gaussian"
        mean_abs = scale * math.sqrt(2.0 / math.pi)
    mean_cells = sum(cells) / count
    tv = min(1.0, 0.5 * mean_cells * mean_abs / max(n, 1))
    return OrderForecast(k, count, mean_cells, kind, scale, tv)


def forecast(mechanism_name: str, cost, epsilon: float, delta: float | None, domain: Domain, public_rows: int,
             caps_rows: bool = False) -> Forecast:
    """The forecast of one run (see the module docstring); ``cost`` is the mechanism's PrivacyCost;
    ``caps_rows``: the mechanism's guarantee caps the rows it may release (``Mechanism.caps_rows``)."""
    if public_rows < 1:
        raise ValueError(f"public_rows must be >= 1, got {public_rows}")
    orders = tuple(order_forecast(domain, k, cost.rho, cost.pure_epsilon, public_rows)
                   for k in (1, 2, 3) if k <= domain.n_attributes)
    warnings, notes = [], []
    for order in orders:
        typical = TYPICAL_INDEPENDENT_TV.get(order.k, 0.0)
        if mechanism_name in ADAPTIVE:
            if order.k == 1 and order.expected_tv_from_noise > 0.02:
                warnings.append(f"even single columns get about {order.expected_tv_from_noise:.3f} of error from "
                                "noise: expect a release close to the independent-columns model at best")
            elif order.k >= 2 and order.expected_tv_from_noise > typical:
                # Not a warning: an adaptive mechanism never measures every k-way marginal at once. But the
                # forecast must not call this noise small either.
                notes.append(f"measured all at once, noise alone would put more error on {order.k}-way marginals than "
                             f"the independent-columns model typically makes ({typical:.2f}); {mechanism_name} "
                             f"measures only those it selects and infers the rest, so its {order.k}-way accuracy rests "
                             "on that selection (the internal audit on public or generated data shows it)")
            continue
        if order.k >= 2 and order.expected_tv_from_noise > typical:
            warnings.append(
                f"noise alone would put about {order.expected_tv_from_noise:.3f} of error on an average {order.k}-way "
                f"marginal if all were measured, more than the independent-columns model typically makes "
                f"({typical:.2f}): expect little gain over that model on {order.k}-way marginals unless epsilon or "
                "n grows, or the schema's bins get coarser")
    if caps_rows:
        warnings.append(f"{mechanism_name} releases at most the rows its guarantee allows: see `privsynth feasibility`")
    largest = max(math.prod(domain.sizes[a] for a in m) for k in (1, 2, 3) if k <= domain.n_attributes
                   for m in combinations(range(domain.n_attributes), k))
    full = math.prod(domain.sizes)
    return Forecast(mechanism_name, epsilon, delta, cost.rho, public_rows, domain.width, largest,
                    min(public_rows, full), orders, tuple(warnings), tuple(notes))


def _tv_text(tv: float) -> str:
    if tv >= 1.0:
        return "total-variation error at its maximum of 1 (the noise exceeds the counts)"
    return f"about {tv:.4f} total-variation error per marginal"


def format_forecast(f: Forecast) -> str:
    lines = [f"Forecast for {f.mechanism} at epsilon {f.epsilon:g}" + (f", delta {f.delta:g}" if f.delta else "") +
             f" (rho {f.rho:.4g}) on about {f.public_rows:,} rows (stated, public):"]
    for o in f.orders:
        lines.append(f"  {o.k}-way: {o.marginals} marginals of {o.mean_cells:.0f} cells on average; measured all at "
                     f"once, each cell gets {o.noise} noise of scale {o.noise_per_cell:.3g}: "
                     f"{_tv_text(o.expected_tv_from_noise)}")
    lines.append(f"  memory: one-hot width {f.width}; largest 3-way marginal {f.largest_marginal_cells:,} cells; the "
                 f"engine returns at most {f.histogram_rows_at_most:,} histogram rows")
    if f.cost:
        lines.append(f"  time and memory of the mechanism: about {f.cost['seconds']:.0f} s (at most "
                     f"{f.cost['seconds_bound']:.0f} s with every model at its size cap), peak about "
                     f"{f.cost['memory_mb']:.0f} MB; {f.cost['basis']}")
    if f.mechanism in ADAPTIVE:
        lines.append(f"  {f.mechanism} is adaptive: it measures the marginals it selects, each with more budget than "
                     "the all-at-once figures, so expect less error than them on 2- and 3-way marginals")
    lines += [f"  warning: {w}" for w in f.warnings] + [f"  note: {n}" for n in f.notes]
    if not f.warnings and not f.notes:
        lines.append("  no warning: the noise is small against typical marginal errors")
    lines.append("  (Gaussian: Bun & Steinke 2016; Laplace: Dwork et al. 2006; adaptive measurement: McKenna et al. "
                 "2022)")
    return "\n".join(lines)
