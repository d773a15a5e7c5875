"""Private sampling (paper 004) with the practical limits of paper 002, in one place.

Modules: ``mechanism`` (config, accounting, statistics, release), ``solvers`` (shrinkage LP and proximal
QP), ``walsh`` (Walsh features on the cube), ``bounds`` (the privacy accountant), ``space`` (the random reduced space),
``feasibility`` (the user-facing report behind ``privsynth feasibility``). This package re-exports the mechanism's
module contract (see ``privsynth.mechanisms.base``), so ``get_mechanism("private_sampling")`` returns it.
"""

from privsynth.mechanisms.private_sampling.mechanism import (
    NAME,
    PUBLIC_ROWS_OPTION,
    ROWS_OPTION,
    Config,
    FeasibilityReport,
    InfeasibleRequestError,
    PrivateSamplingStatistics,
    check_config,
    check_feasible,
    collect_statistics,
    configure_for,
    forecast,
    memory_estimate_bytes,
    privacy_cost,
    run,
)
from privsynth.mechanisms.private_sampling.space import ReducedSpaceError

__all__ = ["NAME", "PUBLIC_ROWS_OPTION", "ROWS_OPTION", "Config", "FeasibilityReport", "InfeasibleRequestError",
           "PrivateSamplingStatistics", "ReducedSpaceError", "check_config", "check_feasible",
           "collect_statistics", "configure_for", "forecast", "memory_estimate_bytes", "privacy_cost", "run"]
