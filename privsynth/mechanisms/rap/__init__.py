"""RAP: relaxed adaptive projection (Aydore et al., ICML 2021); the module contract of privsynth.mechanisms.base.

The mechanism lives in ``mechanism.py`` (its docstring states the guarantee); the array code of the
projection in ``backend.py``; the defaults fitted to a narrow table in ``configure.py``.
"""

from privsynth.mechanisms.rap.configure import configure_for
from privsynth.mechanisms.rap.mechanism import (
    NAME,
    Config,
    RapStatistics,
    budget,
    check_config,
    collect_statistics,
    privacy_cost,
    releases_n_estimate,
    run,
)

__all__ = ["NAME", "Config", "RapStatistics", "budget", "check_config", "collect_statistics", "configure_for",
           "privacy_cost", "releases_n_estimate", "run"]
