"""Public facts about a table's columns: what documentation, flags and data contracts state.

A ``PublicFacts`` is PUBLIC by construction: it is built from the user's flags (``--bounds``,
``--categories``), from data contracts kept beside the table (dbt ``schema.yml``, Great
Expectations suites, Frictionless table schemas) or from the source database's catalogue (ENUM
types, CHECK constraints, NOT NULL, declared types), and NEVER from the rows. Discovery uses what it
states first, charges nothing for it, marks each fact in the written schema with where it came from
(``public: dbt models/schema.yml accepted_values``), and discovers only what is left under DP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from privsynth.errors import ContractError

# privsynth column types a contract may state (``privsynth.schema.model.ColumnType``)
COLUMN_TYPES = ("categorical", "integer", "float", "boolean", "date", "timestamp")


@dataclass(frozen=True)
class PublicColumn:
    """What public sources state about one column (None: they say nothing about it).

    ``bounds`` are (low, high) in the column's own terms: numbers, or ISO text for dates and
    timestamps; either end may be None when a contract gives one side only. ``origins`` maps each
    stated fact (type, categories, bounds, nullable) to where it came from, for the drafted file.
    """

    name: str
    type: str | None = None
    categories: tuple[str, ...] | None = None
    bounds: tuple[float | str | None, float | str | None] | None = None
    nullable: bool | None = None
    origins: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type is not None and self.type not in COLUMN_TYPES:
            raise ContractError(f"column {self.name!r}: type {self.type!r} is not one of {list(COLUMN_TYPES)}")

    def origin(self, fact: str) -> str | None:
        return self.origins.get(fact)


@dataclass(frozen=True)
class PublicFacts:
    """Public facts per column name. ``merged`` combines sources; two that contradict each other are refused."""

    columns: Mapping[str, PublicColumn] = field(default_factory=dict)

    def get(self, name: str) -> PublicColumn | None:
        return self.columns.get(name)

    def __bool__(self) -> bool:
        return bool(self.columns)

    def merged(self, other: PublicFacts) -> PublicFacts:
        """Both sources' facts; a fact stated by both must agree (else ContractError naming both origins)."""
        out = dict(self.columns)
        for name, col in other.columns.items():
            out[name] = merge_column(out[name], col) if name in out else col
        return PublicFacts(out)

    @staticmethod
    def of(columns: Iterable[PublicColumn]) -> PublicFacts:
        facts = PublicFacts()
        for col in columns:
            facts = facts.merged(PublicFacts({col.name: col}))
        return facts


def merge_column(a: PublicColumn, b: PublicColumn) -> PublicColumn:
    """One column's facts from two sources; equal facts merge, different ones are a ContractError."""
    values: dict = {}
    origins = dict(a.origins)
    for fact in ("type", "categories", "bounds", "nullable"):
        va, vb = getattr(a, fact), getattr(b, fact)
        if va is not None and vb is not None and va != vb:
            raise ContractError(f"column {a.name!r}: {fact} {va!r} ({a.origin(fact)}) contradicts {vb!r} "
                                f"({b.origin(fact)})")
        values[fact] = va if va is not None else vb
        if va is None and vb is not None and b.origin(fact):
            origins[fact] = b.origin(fact)
    return replace(a, **values, origins=origins)


def from_flags(bounds: Mapping[str, tuple] | None, categories: Mapping[str, tuple[str, ...]] | None) -> PublicFacts:
    """The user's ``--bounds`` and ``--categories`` as public facts."""
    cols: dict[str, PublicColumn] = {}
    for name, (low, high) in (bounds or {}).items():
        cols[name] = PublicColumn(name, bounds=(low, high), origins={"bounds": "you gave --bounds"})
    for name, cats in (categories or {}).items():
        col = PublicColumn(name, categories=tuple(cats), origins={"categories": "you gave --categories"})
        cols[name] = merge_column(cols[name], col) if name in cols else col
    return PublicFacts(cols)
