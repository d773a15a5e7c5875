"""What every mechanism hands to the rest of the pipeline.

A mechanism module (``privsynth.mechanisms.<name>``) provides:

* ``NAME``: the name used by ``--mechanism``;
* ``Config``: a subclass of ``MechanismConfig`` (frozen; epsilon and delta shared), validated before
  any data is read;
* ``privacy_cost(config) -> PrivacyCost``: the cost, from the configuration alone;
* ``collect_statistics(batches, domain, config)``: one streaming pass over level-code batches that
  returns the (private) statistics the mechanism needs; nothing else of the data reaches it;
* ``run(statistics, domain, config, noise) -> Release``: the DP release, using only ``noise`` for
  privacy randomness and ``noise.post_rng`` for post-processing randomness. Every privacy draw states the
  sensitivity of what it noises (``sensitivity=``), or sits in a scope priced by the mechanism's proof
  (``noise.one_release(price)``: a redrawing selection, a sampler): the source's meter prices each draw
  against ``privacy_cost(config)``, the charge that authorised it, and a draw past it raises InternalError
  (``privsynth.privacy.meter``).

The release is public (DP). It is a weighted set of rows in the one-hot layout of the domain, each
attribute block on the probability simplex: relaxed rows (RAP), reduced-space points with LP weights
(reduced_space), cell centroids with noisy weights (microaggregation), or exact records (private
sampling, ``exact=True``: published once each, never resampled, because every extra draw would cost
privacy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.noise import NoiseSource
from privsynth.schema.encoding import Domain

WEIGHT_COLUMN = "__weight__"
RELEASE_BATCH_ROWS = 4_096  # points per Arrow batch, Parquet row group and check of a release


class MechanismConfig(BaseModel):
    """The fields every mechanism's frozen config shares, validated before any data is read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="privacy budget epsilon of this release")
    delta: float = Field(1e-9, gt=0, lt=1, allow_inf_nan=False,
                         description="delta of the (epsilon, delta) statement; pure-DP mechanisms only report it")

    @field_validator("epsilon", "delta", mode="before")
    @classmethod
    def _number_not_bool(cls, value: object, info) -> object:
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean")
        return value


def check_memory(mechanism: str, need_bytes: float, max_memory_gb: float, what: str, advice: str) -> None:
    """Refuse, before any charge, a config whose estimated memory exceeds the mechanism's ``max_memory_gb``.

    ``what`` says what the memory is for (from the config and domain only), ``advice`` how to lower it.
    """
    if need_bytes > max_memory_gb * 2 ** 30:
        raise ValueError(f"{mechanism} would need about {need_bytes / 2 ** 30:.1f} GiB ({what}), above "
                         f"max_memory_gb={max_memory_gb:g}; {advice}, or raise max_memory_gb")


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement a mechanism released (public, DP): the DP report compares the
    synthetic table with these, at no privacy cost.

    attributes: the marginal (attribute indices, ascending); noisy_counts: its cells in the layout of
    ``privsynth.schema.workload.marginal_counts``; noise: "gaussian" or "laplace"; scale: the noise's standard
    deviation (gaussian) or Laplace scale b; level_groups: empty when the cells are the attributes'
    levels, else per attribute the merged level of each original level (None: not merged), for a
    mechanism that measured on merged levels (AIM's domain compression).
    """

    attributes: tuple[int, ...]
    noisy_counts: np.ndarray
    noise: str
    scale: float
    level_groups: tuple[tuple[int, ...] | None, ...] = ()


@dataclass(frozen=True)
class EarlierCounts:
    """Gaussian noisy counts of some levels of one attribute, released by an earlier step of the same run
    (discovery's category histograms) and already charged: a mechanism that takes them (``TAKES_EARLIER_COUNTS``)
    may estimate from them at no privacy cost (post-processing of a DP output).

    attribute: the attribute's index in the domain; levels: the levels measured (the others were not);
    noisy_counts and sigmas: per measured level, its noisy count and the standard deviation of its noise."""

    attribute: int
    levels: tuple[int, ...]
    noisy_counts: tuple[float, ...]
    sigmas: tuple[float, ...]

    def __post_init__(self) -> None:
        if not (len(self.levels) == len(self.noisy_counts) == len(self.sigmas)):
            raise ValueError("earlier counts need one noisy count and one sigma per level")
        if len(set(self.levels)) != len(self.levels) or any(s <= 0 or not math.isfinite(s) for s in self.sigmas):
            raise ValueError("earlier counts need distinct levels and finite positive sigmas")


@dataclass(frozen=True)
class Release:
    mechanism: str
    points: np.ndarray
    weights: np.ndarray
    exact: bool = False
    public_facts: dict = field(default_factory=dict)
    measurements: tuple[Measurement, ...] = ()

    def __post_init__(self) -> None:
        if self.points.ndim != 2 or self.weights.shape != (self.points.shape[0],):
            raise ValueError("a release needs points (m x width) and one weight per point")
        if self.points.shape[0] == 0:
            raise ValueError("a release needs at least one point")
        if np.any(self.weights < 0) or not np.isclose(self.weights.sum(), 1.0, atol=1e-6):
            raise ValueError("release weights must be non-negative and sum to 1")

    def check_domain(self, domain: Domain, atol: float = 1e-6) -> None:
        """Every attribute block of every point lies on the simplex."""
        if self.points.shape[1] != domain.width:
            raise ValueError(f"release width {self.points.shape[1]} does not match the domain width {domain.width}")
        # A batch of points at a time: reduceat casts its whole input to the sums' type first (a one-hot
        # release of 100,000 records at 2,781 levels as float64 is 2.2 GB).
        for start in range(0, self.points.shape[0], RELEASE_BATCH_ROWS):
            part = self.points[start: start + RELEASE_BATCH_ROWS]
            if np.any(part < -atol):
                raise ValueError("release points have negative entries")
            sums = np.add.reduceat(part, domain.offsets[:-1], axis=1, dtype=np.float64)
            if not np.allclose(sums, 1.0, atol=atol):
                raise ValueError("release points are not on the simplex in every attribute block")

    def to_arrow(self, column_names: list[str]) -> pa.Table:
        return pa.concat_tables(self.arrow_batches(column_names))

    def arrow_batches(self, column_names: list[str], rows: int = RELEASE_BATCH_ROWS) -> Iterator[pa.Table]:
        """The release as Arrow tables of ``rows`` points each (one column per level, then the weights), so
        that a writer holds one batch beside the points, never a second copy of them (a one-hot release of
        100,000 records at 2,767 levels is 277 MB)."""
        meta = {b"mechanism": self.mechanism.encode(), b"exact": b"1" if self.exact else b"0"}
        for start in range(0, self.points.shape[0], rows):
            part = self.points[start: start + rows]
            arrays = {name: pa.array(part[:, j]) for j, name in enumerate(column_names)}
            arrays[WEIGHT_COLUMN] = pa.array(self.weights[start: start + rows])
            yield pa.table(arrays).replace_schema_metadata(meta)

    @staticmethod
    def from_arrow(table: pa.Table) -> Release:
        return Release.from_batches(table.schema, table.num_rows, table.to_batches())

    @staticmethod
    def from_batches(schema: pa.Schema, num_rows: int, batches: Iterable[pa.RecordBatch]) -> Release:
        """The release of ``num_rows`` points from Arrow batches (``arrow_batches``' layout), filled into one
        array in the columns' own type when they share it: a one-hot release's uint8 stays a byte a level."""
        meta = schema.metadata or {}
        names = [n for n in schema.names if n != WEIGHT_COLUMN]
        types = {schema.field(name).type for name in names}
        dtype = types.pop().to_pandas_dtype() if len(types) == 1 else np.float64
        points = np.empty((num_rows, len(names)), dtype=dtype)
        weights = np.empty(num_rows, dtype=np.float64)
        start = 0
        for batch in batches:
            stop = start + batch.num_rows
            for j, name in enumerate(names):
                points[start:stop, j] = batch.column(name).to_numpy(zero_copy_only=False)
            weights[start:stop] = batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False)
            start = stop
        if start != num_rows:
            raise ValueError(f"a release of {num_rows} points came with {start}")
        return Release(mechanism=meta.get(b"mechanism", b"").decode(), points=points, weights=weights,
                       exact=meta.get(b"exact") == b"1")


class MechanismModule(Protocol):
    """What a mechanism module must provide (module docstring); its optional members, with their defaults,
    are listed once, in ``privsynth.mechanisms.catalogue.Mechanism``."""

    NAME: str
    Config: type[MechanismConfig]

    def privacy_cost(self, config: Any) -> PrivacyCost: ...

    def collect_statistics(self, data: Any, domain: Domain, config: Any) -> Any: ...

    def run(self, statistics: Any, domain: Domain, config: Any, noise: NoiseSource) -> Release: ...
