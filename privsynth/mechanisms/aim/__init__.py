"""AIM: an adaptive and iterative mechanism (McKenna et al., VLDB 2022);
the module contract of privsynth.mechanisms.base.

The mechanism lives in ``mechanism.py``; the graphical model it fits (post-processing) in ``model.py``;
the cost forecast in ``cost.py``; per-round progress for callers in ``progress.py``.
"""

from privsynth.mechanisms.aim.cost import CostForecast, forecast_cost
from privsynth.mechanisms.aim.mechanism import (
    NAME,
    PUBLIC_ROWS_OPTION,
    TAKES_EARLIER_COUNTS,
    TAKES_STRUCTURAL_ZEROS,
    AimStatistics,
    Config,
    check_config,
    collect_statistics,
    configure_for,
    forecast,
    privacy_cost,
    releases_n_estimate,
    run,
)
from privsynth.mechanisms.aim.progress import RoundProgress, reporting_progress

__all__ = ["NAME", "PUBLIC_ROWS_OPTION", "TAKES_EARLIER_COUNTS", "TAKES_STRUCTURAL_ZEROS", "AimStatistics", "Config",
           "CostForecast", "forecast_cost", "RoundProgress",
           "check_config", "collect_statistics", "configure_for", "forecast", "privacy_cost", "releases_n_estimate",
           "reporting_progress", "run"]
