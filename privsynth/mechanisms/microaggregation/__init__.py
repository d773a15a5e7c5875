"""Microaggregation by covariance loss (paper 003), in one place.

Modules: ``mechanism`` (config, accounting, statistics, release) and ``cells`` (the pure math: embedding,
private PCA, covering lattice, cell statistics, projections, k-anonymous equipartition). The math module
is named ``cells``, not ``math``: a sibling ``math.py`` would be shadowed-by/shadow the standard library
as soon as a file of this folder is run as a script or the folder lands on ``sys.path``, and the name
says what it computes (the partition of records into lattice cells and the cells' statistics).
This package re-exports the mechanism's module contract (see ``privsynth.mechanisms.base``), so
``get_mechanism("microaggregation")`` returns it.
"""

from privsynth.mechanisms.microaggregation.mechanism import (
    NAME,
    Config,
    MicroaggregationStatistics,
    budget_shares,
    check_config,
    collect_statistics,
    forecast,
    memory_estimate_bytes,
    privacy_cost,
    releases_n_estimate,
    run,
)

__all__ = ["NAME", "Config", "MicroaggregationStatistics", "budget_shares", "check_config",
           "collect_statistics", "forecast", "memory_estimate_bytes", "privacy_cost", "releases_n_estimate", "run"]
