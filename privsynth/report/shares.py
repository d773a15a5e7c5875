"""What the release holds, per column: its ``<out-of-domain>``, missing and beyond-the-bounds shares.

Guarantee: every figure here is post-processing of DP outputs, so free and public: the release's own
noisy measurements (their 1-way counts), the synthetic table (itself post-processing of the release) and
discovery's DP estimates (``discovery.json``). No real row is read.

* ``<out-of-domain>`` and ``<missing>`` (structural levels, ``schema.encoding.structural_levels``): the
  share the release's noisy 1-way counts give the level (every measurement containing the column,
  combined with inverse-variance weights, ``uncertainty.estimate``), with a 95% error bar, beside the
  synthetic table's own share. The bar is 1.96 times the combined noise's standard deviation plus the
  rounding's sampling deviation sqrt(q (1 - q) / N) (q the synthetic share, N its rows), both as shares
  of the noisy total, so it covers the synthetic share when the model fits the measurement. A level the
  rounding suppressed (its combined noisy count below ``EVIDENCE_SIGMAS`` deviations,
  ``evidence.unsupported_levels``: the synthetic table holds none) is stated from that count, the figure
  that decided (``evidence.level_evidence``), with a bar of at least ``EVIDENCE_SIGMAS`` deviations. Without a
  measurement: "not measured" (the synthetic share alone is stated).
* Beyond the bounds (``on_out_of_domain: clip``): a clipped value is binned into the edge bin, so the
  release cannot tell it from a value inside that bin. The DP estimate comes from discovery's noisy
  bounds histograms (``discovery.bounds.BeyondBounds``), as a share of the column's present values
  with its 95% bar; with public bounds, or a schema given to the run, no DP estimate exists and the
  report says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from privsynth.mechanisms.base import Measurement
from privsynth.report.evidence import EVIDENCE_SIGMAS, level_evidence, unsupported_levels
from privsynth.report.uncertainty import Estimate
from privsynth.schema import MISSING_LABEL, Column, Schema
from privsynth.schema.encoding import domain_of, structural_levels

Z95 = 1.959964
NO_ESTIMATE = ("no DP estimate: a clipped value is binned into the edge bin, so the release cannot tell it from a "
               "value inside that bin, and these bounds were not drawn by this run's discovery")


@dataclass(frozen=True)
class LevelShare:
    """One structural level's share in the release (public: post-processing of DP outputs).

    ``measured``: the noisy share (cut to [0, 1]) or None (not measured); ``error_bar``: its 95%
    half-width; ``synthetic``: the synthetic table's exact share; ``suppressed``: the rounding removed
    the level (no evidence in the 1-way count); ``source``: what the measured share is read from."""

    level: str
    status: str  # "measured" | "not measured"
    synthetic: float
    measured: float | None = None
    error_bar: float | None = None
    suppressed: bool = False
    source: str = ""

    @property
    def within(self) -> bool | None:
        """Whether the synthetic share lies within the error bar of the measured one (None: not measured)."""
        if self.measured is None or self.error_bar is None:
            return None
        return abs(self.synthetic - self.measured) <= self.error_bar + 1e-12

    def to_json(self) -> dict:
        return {**asdict(self), "synthetic_within_error_bar": self.within}


@dataclass(frozen=True)
class BeyondShare:
    """Values beyond a clip column's bounds, written at its edge bins: discovery's DP estimate (shares of
    present values, 95% half-widths) and the edge bins' shares in the synthetic table; or none."""

    status: str  # "estimated" | "no DP estimate"
    below: float | None = None
    below_error_bar: float | None = None
    above: float | None = None
    above_error_bar: float | None = None
    lowest_bin: str = ""
    highest_bin: str = ""
    lowest_bin_synthetic: float = 0.0
    highest_bin_synthetic: float = 0.0
    statement: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def _sd_share(est: Estimate, total: float) -> float:
    """One cell's 95% noise half-width as a share (Laplace: the L1 bound, which covers every cell)."""
    return (Z95 * est.cell_sd if est.cell_sd is not None else est.noise_l1) / total


def level_share(label: str, level: int, synthetic: float, rows: int, est: Estimate | None,
                evidence: tuple[float, float, float] | None, suppressed: bool) -> LevelShare:
    """A structural level's stated share (module docstring): pure, from DP outputs only. ``evidence``: the
    (count, total, deviation) that decided a suppressed level (``evidence.level_evidence``)."""
    if suppressed and evidence is not None:
        count, total, sd = evidence
        total = max(total, 1.0)
        bar = max(Z95, EVIDENCE_SIGMAS) * sd / total
        return LevelShare(label, "measured", synthetic, float(min(1.0, max(0.0, count / total))), bar, True,
                          "the noisy measurements (below the evidence bar: the synthetic table holds none)")
    index = None if est is None else est.level_cell(level)
    if est is None or index is None:
        return LevelShare(label, "not measured", synthetic,
                          source="no measurement holds this level alone" if est is not None else "no measurement")
    total = max(float(est.values.sum()), 1.0)
    measured = float(min(1.0, max(0.0, est.values[index] / total)))
    sampling = Z95 * math.sqrt(synthetic * (1.0 - synthetic) / max(rows, 1))
    return LevelShare(label, "measured", synthetic, measured, _sd_share(est, total) + sampling, False,
                      f"{est.sources} noisy measurement(s) combined")


def structural_shares(schema: Schema, synthetic: np.ndarray, estimates: dict, measurements) -> list[dict]:
    """Per kept column: its ``<out-of-domain>`` and ``<missing>`` shares (None where the column has no such
    level: not nullable, or values outside its domain are clipped or refused)."""
    structural = structural_levels(schema)
    domain = domain_of(schema)
    suppressed = unsupported_levels(structural, tuple(measurements), domain)
    rows = int(synthetic.shape[0])
    out = []
    for a, col in enumerate(schema.kept_columns):
        entry: dict = {"out_of_domain": None, "missing": None}
        for level in structural.get(a, ()):
            label = col.labels[level]
            share = float(np.mean(synthetic[:, a] == level)) if rows else 0.0
            gone = level in suppressed.get(a, ())
            found = level_share(label, level, share, rows, estimates.get((a,)),
                                level_evidence(tuple(measurements), a, level, domain) if gone else None, gone)
            entry["missing" if label == MISSING_LABEL else "out_of_domain"] = found.to_json()
        out.append(entry)
    return out


def beyond_share(col: Column, codes: np.ndarray, found: dict | None) -> BeyondShare | None:
    """A clip column's values beyond its bounds (None: not a clip column): discovery's DP estimate
    (``discovery.json``'s ``beyond_bounds_dp`` entry) or 'no DP estimate', with its edge bins' synthetic shares."""
    if col.on_out_of_domain != "clip" or col.type not in ("integer", "float", "date", "timestamp"):
        return None
    labels = col.labels
    rows = max(int(codes.size), 1)
    edges = dict(lowest_bin=str(labels[0]), highest_bin=str(labels[col.domain_levels - 1]),
                 lowest_bin_synthetic=float(np.sum(codes == 0) / rows),
                 highest_bin_synthetic=float(np.sum(codes == col.domain_levels - 1) / rows))
    if not found:
        return BeyondShare("no DP estimate", statement=NO_ESTIMATE, **edges)
    return BeyondShare("estimated", float(found["below_share"]), float(found["below_error_bar"]),
                       float(found["above_share"]), float(found["above_error_bar"]),
                       statement="values beyond the bounds, written at the edge bins: discovery's DP estimate "
                                 "(share of present values, 95% bar)", **edges)


def release_holds(schema: Schema, synthetic: np.ndarray, estimates: dict, measurements: tuple[Measurement, ...],
                  discovery: dict | None) -> list[dict]:
    """Per kept column, what the release holds: ``out_of_domain``, ``missing`` and ``beyond_bounds``
    (module docstring; each None where the column has no such share)."""
    beyond = ((discovery or {}).get("beyond_bounds_dp") or {})
    out = []
    for a, (col, entry) in enumerate(zip(schema.kept_columns,
                                         structural_shares(schema, synthetic, estimates, measurements))):
        found = beyond_share(col, synthetic[:, a], beyond.get(col.name))
        out.append({"column": col.name, **entry, "beyond_bounds": None if found is None else found.to_json()})
    return out
