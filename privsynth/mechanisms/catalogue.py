"""What each mechanism is, in plain words (the table `privsynth mechanisms` prints and docs/mechanisms.md
explains), and a mechanism's config from run parameters."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class MechanismInfo:
    name: str
    paper: str
    guarantee: str
    good_for: str


CATALOGUE: tuple[MechanismInfo, ...] = (
    MechanismInfo("aim", "McKenna et al. 2022, AIM (VLDB)",
                  "rho-zCDP -> (epsilon, delta)", "the most accurate marginals at every epsilon; wide tables"),
    MechanismInfo("rap", "Aydore et al. 2021, relaxed adaptive projection (ICML)",
                  "rho-zCDP -> (epsilon, delta)", "a gradient-based alternative; many rows from one release"),
    MechanismInfo("reduced_space", "Boedihardjo, Strohmer, Vershynin: statistical framework",
                  "pure epsilon-DP", "pure DP (no delta) on narrow tables; 2-way marginals"),
    MechanismInfo("microaggregation", "Boedihardjo, Strohmer, Vershynin: covariance loss",
                  "pure epsilon-DP", "a fast pure-DP baseline; second moments"),
    MechanismInfo("private_sampling", "Boedihardjo, Strohmer, Vershynin: private sampling; Pierquin et al.",
                  "pure epsilon-DP for k rows, n declared by the user", "research: noiseless, but at realistic n it allows 0-1 rows"),
)


def describe_mechanisms(registered: list[str], default: str) -> str:
    """A plain-text table of the registered mechanisms, the default marked."""
    known = {info.name: info for info in CATALOGUE}
    rows = [("mechanism", "guarantee", "good for", "paper")]
    for name in registered:
        info = known.get(name, MechanismInfo(name, "-", "-", "-"))
        rows.append((name + (" (default)" if name == default else ""), info.guarantee, info.good_for, info.paper))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(r[:3], widths)), r[3]]).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 5)
    return "\n".join(lines) + "\n\nDetails, and which to pick: docs/mechanisms.md"


def mechanism_config(mechanism: ModuleType, epsilon: float, delta: float, rows: int | None, options: dict):
    """The mechanism's frozen config from run parameters; raises pydantic errors naming the field."""
    values = dict(options)
    values.setdefault("epsilon", epsilon)
    values.setdefault("delta", delta)
    # A mechanism whose guarantee caps the rows it releases (private sampling) names the config field
    # that takes --rows; for every other mechanism the row count is free post-processing.
    rows_option = getattr(mechanism, "ROWS_OPTION", None)
    if rows_option is not None and rows is not None:
        values.setdefault(rows_option, rows)
    return mechanism.Config(**values)
