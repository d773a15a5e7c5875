"""The mechanisms privsynth knows: one entry each (what it is, in plain words, and where its code lives),
and the one place that reads a mechanism module's optional members.

A mechanism is its subpackage (``privsynth.mechanisms.<name>``, the contract ``base.MechanismModule``)
plus one ``MechanismEntry`` below. The pipeline never probes a module: ``load`` builds a ``Mechanism``
whose optional members are explicit, with their defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsynth.errors import UnknownMechanismError

if TYPE_CHECKING:  # the catalogue stays import-light: `privsynth --help` and `privsynth mechanisms` read it
    from privsynth.mechanisms.base import EarlierCounts, MechanismConfig, MechanismModule, Release
    from privsynth.schema.determined import StructuralZeros
    from privsynth.schema.encoding import Domain

ADD_REMOVE = "add or remove one record"


@dataclass(frozen=True)
class MechanismEntry:
    """A catalogue entry: the name for ``--mechanism``, its module, the paper, the guarantee, what it is
    good for; listings follow the catalogue's order."""

    name: str
    module: str
    paper: str
    guarantee: str
    good_for: str


CATALOGUE: tuple[MechanismEntry, ...] = (
    MechanismEntry("aim", "privsynth.mechanisms.aim", "McKenna et al. 2022, AIM (VLDB)",
                   "rho-zCDP -> (epsilon, delta)", "the most accurate marginals at every epsilon; wide tables"),
    MechanismEntry("rap", "privsynth.mechanisms.rap", "Aydore et al. 2021, relaxed adaptive projection (ICML)",
                   "rho-zCDP -> (epsilon, delta)", "a gradient-based alternative; many rows from one release"),
    MechanismEntry("reduced_space", "privsynth.mechanisms.reduced_space",
                   "Boedihardjo, Strohmer, Vershynin: statistical framework",
                   "pure epsilon-DP", "pure DP (no delta) on narrow tables; 2-way marginals"),
    MechanismEntry("microaggregation", "privsynth.mechanisms.microaggregation",
                   "Boedihardjo, Strohmer, Vershynin: covariance loss",
                   "pure epsilon-DP", "a fast pure-DP baseline; second moments"),
    MechanismEntry("private_sampling", "privsynth.mechanisms.private_sampling",
                   "Boedihardjo, Strohmer, Vershynin: private sampling; Pierquin et al.",
                   "pure epsilon-DP for k rows, n declared by the user",
                   "research: noiseless, but at realistic n it allows 0-1 rows"),
)
ENTRIES: dict[str, MechanismEntry] = {entry.name: entry for entry in CATALOGUE}


def _identity(config: MechanismConfig, domain: Domain) -> MechanismConfig:  # noqa: ARG001
    return config


def _accept(config: MechanismConfig, domain: Domain) -> None:  # noqa: ARG001
    return None


def _no_estimate(config: MechanismConfig) -> bool:  # noqa: ARG001
    return False


@dataclass(frozen=True)
class Mechanism:
    """A loaded mechanism: the module's required members, and every optional one the pipeline uses,
    explicit, with its default.

    configure_for(config, domain): the config adapted to the domain (default: as given);
    check_config(config, domain): refuse, before any charge, a config the domain cannot take;
    check_feasible(config): what the guarantee allows (private sampling; None: nothing to check);
    releases_n_estimate(config): the release carries a DP estimate of n (else --rows is required);
    rows_option / public_rows_option: the config fields that take --rows / --public-rows (None: free);
    forecast_cost(config, domain): a time and memory model (None: none); neighbours: the relation;
    takes_earlier_counts: ``run`` takes ``earlier`` (DP counts an earlier step of the run released, which it may
    join with its own measurements; a mechanism that does not take them releases as if there were none);
    takes_structural_zeros: ``run`` takes ``zeros`` (the schema's public ``determined_by`` cells, held at zero;
    a mechanism that does not take them releases as if the schema stated no rule)."""

    entry: MechanismEntry
    module: MechanismModule
    configure_for: Callable[[MechanismConfig, Domain], MechanismConfig] = _identity
    check_config: Callable[[MechanismConfig, Domain], None] = _accept
    check_feasible: Callable[[MechanismConfig], Any] | None = None
    releases_n_estimate: Callable[[MechanismConfig], bool] = _no_estimate
    rows_option: str | None = None
    public_rows_option: str | None = None
    forecast_cost: Callable[[MechanismConfig, Domain], Any] | None = None
    neighbours: str = ADD_REMOVE
    takes_earlier_counts: bool = False
    takes_structural_zeros: bool = False

    @property
    def caps_rows(self) -> bool:
        """A mechanism whose guarantee caps the rows it releases names the field that takes --rows."""
        return self.rows_option is not None

    @property
    def NAME(self) -> str:  # noqa: N802  (the module contract's name)
        return self.entry.name

    @property
    def Config(self) -> type[MechanismConfig]:  # noqa: N802
        return self.module.Config

    def privacy_cost(self, config: MechanismConfig):
        return self.module.privacy_cost(config)

    def collect_statistics(self, data, domain: Domain, config: MechanismConfig):
        return self.module.collect_statistics(data, domain, config)

    def run(self, statistics, domain: Domain, config: MechanismConfig, noise,
            earlier: tuple[EarlierCounts, ...] = (), zeros: tuple[StructuralZeros, ...] = ()) -> Release:
        extra: dict[str, Any] = {}
        if earlier and self.takes_earlier_counts:
            extra["earlier"] = earlier
        if zeros and self.takes_structural_zeros:
            extra["zeros"] = zeros
        return self.module.run(statistics, domain, config, noise, **extra)


OPTIONAL = {"configure_for": "configure_for", "check_config": "check_config", "check_feasible": "check_feasible",
            "releases_n_estimate": "releases_n_estimate", "rows_option": "ROWS_OPTION",
            "public_rows_option": "PUBLIC_ROWS_OPTION", "forecast_cost": "forecast_cost", "neighbours": "NEIGHBOURS",
            "takes_earlier_counts": "TAKES_EARLIER_COUNTS", "takes_structural_zeros": "TAKES_STRUCTURAL_ZEROS"}


def load(name: str) -> Mechanism:
    """The mechanism registered as ``name``, its module imported now (never another's)."""
    entry = ENTRIES.get(name)
    if entry is None:
        raise UnknownMechanismError(f"unknown mechanism {name!r}; expected one of {sorted(ENTRIES)}")
    module = importlib.import_module(entry.module)
    present = {field_name: getattr(module, member) for field_name, member in OPTIONAL.items()
               if hasattr(module, member)}
    return Mechanism(entry, module, **present)


def describe_mechanisms(default: str) -> str:
    """A plain-text table of the catalogue, in its order, the default marked."""
    rows = [("mechanism", "guarantee", "good for", "paper")]
    for info in CATALOGUE:
        rows.append((info.name + (" (default)" if info.name == default else ""), info.guarantee, info.good_for,
                     info.paper))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(r[:3], widths)), r[3]]).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 5)
    return "\n".join(lines) + "\n\nDetails, and which to pick: docs/mechanisms.md"


def mechanism_config(mechanism: Mechanism, epsilon: float, delta: float, rows: int | None, options: dict):
    """The mechanism's frozen config from run parameters; raises pydantic errors naming the field."""
    values = dict(options)
    values.setdefault("epsilon", epsilon)
    values.setdefault("delta", delta)
    # Only a mechanism whose guarantee caps its rows (private sampling) takes --rows in its config; for
    # every other mechanism the row count is free post-processing.
    if mechanism.rows_option is not None and rows is not None:
        values.setdefault(mechanism.rows_option, rows)
    return mechanism.Config(**values)
