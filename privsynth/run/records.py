"""The rounding stage's records: a release as level codes (post-processing of DP outputs only, no cost).

Kept apart from ``stages.py`` so that a caller that needs only the records (bench_peers' and bench_paired's
workers, whose peak memory is a reported figure) does not import the whole stage module with it.
"""

from __future__ import annotations

import numpy as np

from privsynth.mechanisms.base import Measurement, Release
from privsynth.mechanisms.rounding import round_release, suppress_levels
from privsynth.report.evidence import unsupported_levels, unsupported_values
from privsynth.schema.determined import StructuralZeros
from privsynth.schema.encoding import Domain


def release_codes(release: Release, domain: Domain, rows: int | None, rng: np.random.Generator,
                  structural: dict[int, tuple[int, ...]], zeros: tuple[StructuralZeros, ...],
                  measurements: tuple[Measurement, ...]) -> np.ndarray:
    """The release's records as level codes: randomized rounding to ``rows``, then no ``structural`` level
    (``<missing>``, ``<out-of-domain>``) that the noisy ``measurements`` do not support, and no value of a column
    whose values together they do not support (``evidence.unsupported_values``: a column of missing values), each
    replaced in a way that keeps the schema's ``zeros`` (``rounding.suppress_levels``). An exact release is
    written as it is."""
    codes = round_release(release, domain, rows, rng)
    if release.exact:
        return codes
    empty = unsupported_levels(structural, measurements, domain)
    for j, values in unsupported_values(structural, measurements, domain).items():
        empty[j] = (*empty.get(j, ()), *values)
    return suppress_levels(codes, empty, rng, zeros)
