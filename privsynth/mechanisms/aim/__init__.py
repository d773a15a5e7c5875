"""AIM: an adaptive and iterative mechanism (McKenna et al., VLDB 2022); the module contract of privsynth.mechanisms.base.

The mechanism lives in ``mechanism.py``; the graphical model it fits (post-processing) in ``model.py``.
"""

from privsynth.mechanisms.aim.mechanism import (
    NAME,
    AimStatistics,
    Config,
    check_config,
    collect_statistics,
    privacy_cost,
    releases_n_estimate,
    run,
)

__all__ = ["NAME", "AimStatistics", "Config", "check_config", "collect_statistics", "privacy_cost",
           "releases_n_estimate", "run"]
