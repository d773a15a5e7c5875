"""The reduced-space mechanism's config: what the run may set, validated before any data is read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from privsynth.mechanisms.base import MechanismConfig

WorkloadName = Literal["2way", "1way+2way"]


SpaceName = Literal["auto", "noisy_tree", "noisy_marginals", "uniform"]


# Below this epsilon the tree fitted to the noisy 2-way tables was measured worse than the product
# of noisy 1-way marginals on Adult (2-way TV 0.073 vs 0.066 at eps 0.3; 0.034 vs 0.045 at eps 1).
TREE_MIN_EPSILON = 0.5


ObjectiveName = Literal["l2", "l1", "linf"]


class Config(MechanismConfig):
    """Public configuration of the reduced-space mechanism.

    epsilon: pure-DP budget of the Laplace release.
    delta: accepted for the shared interface; unused (the release is pure epsilon-DP).
    workload: the marginals whose cells are the linear statistics. ``"2way"`` (every 2-way marginal;
        the 1-way marginals are sums of their cells) or ``"1way+2way"``.
    reduced_space: the public density Omega* is drawn from, computed from the same noisy release
        (so free): ``"noisy_tree"`` (Chow-Liu tree on the noisy 2-way tables), ``"noisy_marginals"``
        (product of the noisy 1-way marginals), ``"uniform"``, or ``"auto"`` (the tree from epsilon
        ``TREE_MIN_EPSILON`` on, the product below it: a choice from the config alone).
    points_per_statistic: m = ceil(points_per_statistic * |F|), capped by ``max_points`` and by the
        domain size (a domain with at most m records is used whole).
    objective: ``"l2"`` (least squares, accelerated projected gradient; scales to tens of thousands
        of points), ``"l1"`` (LP: sum of absolute residuals) or ``"linf"`` (the paper's minimax LP).
    iterations: gradient iterations of the ``"l2"`` fit (more overfits the noise: 3-way TV rises).
    time_limit_s: HiGHS time limit; hitting it is an error, never a silently worse release.
    max_memory_gb: ``check_config`` refuses, before the budget is charged, a workload and reduced space
        whose estimated peak memory (``memory_estimate_bytes``) exceeds this.
    """

    workload: WorkloadName = "2way"
    reduced_space: SpaceName = "auto"
    points_per_statistic: float = Field(default=3.5, gt=0, allow_inf_nan=False)
    max_points: int = Field(default=50_000, ge=1)
    objective: ObjectiveName = "l2"
    iterations: int = Field(default=200, ge=1)
    time_limit_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    max_memory_gb: float = Field(default=4.0, gt=0, allow_inf_nan=False)

    @field_validator("points_per_statistic", "time_limit_s", "max_points", "iterations", "max_memory_gb",
                     mode="before")
    @classmethod
    def _no_bool(cls, value: object, info) -> object:
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean")
        return value
