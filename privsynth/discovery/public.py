"""Public facts about a table's columns: what documentation, flags and data contracts state.

A ``PublicFacts`` is PUBLIC by construction: it is built from the user's flags (``--bounds``,
``--categories``), from data contracts kept beside the table (dbt ``schema.yml``, Great
Expectations suites, Frictionless table schemas) or from the source database's catalogue (ENUM
types, CHECK constraints, NOT NULL, declared types), and NEVER from the rows. Discovery uses what it
states first, charges nothing for it, marks each fact in the written schema with where it came from
(``public: dbt models/schema.yml accepted_values``), and discovers only what is left under DP.

Rule 10 (docs/design.md 5.10): what is public must be public. A contract can itself be made from the rows (a GX
suite a profiler wrote, an ENUM built with SELECT DISTINCT, a CHECK written from the observed min and
max). Such facts are marked ``derived`` (fact -> why, naming the entry) by the reader that found them;
``contract_trust`` refuses them unless the owner accepts them explicitly, and then every origin written
beside them says DATA-DERIVED, so the schema never presents them as documentation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from privsynth.errors import ContractError

# privsynth column types a contract may state (``privsynth.schema.model.ColumnType``)
COLUMN_TYPES = ("categorical", "integer", "float", "boolean", "date", "timestamp")
# the facts a public source may state about a column
FACTS = ("type", "categories", "bounds", "nullable")
# written beside the origin of a possibly data-derived fact the owner accepted as public
DERIVED_LABEL = "DATA-DERIVED, owner-asserted public (--trust-data-derived-contracts)"


@dataclass(frozen=True)
class PublicColumn:
    """What public sources state about one column (None: they say nothing about it).

    ``bounds`` are (low, high) in the column's own terms: numbers, or ISO text for dates and
    timestamps; either end may be None when a contract gives one side only. ``origins`` maps each
    stated fact (type, categories, bounds, nullable) to where it came from, for the drafted file.
    ``derived`` maps each fact that may have been computed from the rows (rule 10) to why, naming the
    contract's entry; such a fact is used only when the owner accepted it (``contract_trust``).
    """

    name: str
    type: str | None = None
    categories: tuple[str, ...] | None = None
    bounds: tuple[float | str | None, float | str | None] | None = None
    nullable: bool | None = None
    origins: Mapping[str, str] = field(default_factory=dict)
    derived: Mapping[str, str] = field(default_factory=dict)

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
    """One column's facts from two sources; equal facts merge, different ones are a ContractError. A fact
    keeps its source's data-derived mark, unless a source that is not data-derived states it too (then
    the fact stands on that source, and its origin is that source's)."""
    values: dict = {}
    origins, derived = dict(a.origins), dict(a.derived)
    for fact in FACTS:
        va, vb = getattr(a, fact), getattr(b, fact)
        if va is not None and vb is not None and va != vb:
            raise ContractError(f"column {a.name!r}: {fact} {va!r} ({a.origin(fact)}) contradicts {vb!r} "
                                f"({b.origin(fact)})")
        values[fact] = va if va is not None else vb
        takes_b = vb is not None and (va is None or (fact in a.derived and fact not in b.derived))
        if takes_b:
            derived.pop(fact, None)
            if b.origin(fact):
                origins[fact] = b.origin(fact)
            if fact in b.derived:
                derived[fact] = b.derived[fact]
    return replace(a, **values, origins=origins, derived=derived)


def mark_derived(col: PublicColumn, why: str, facts: Iterable[str] | None = None) -> PublicColumn:
    """``col`` with its stated facts (or only ``facts``) marked possibly data-derived: ``why`` names the
    contract's entry and the reason; each origin is labelled ``DERIVED_LABEL``, which the drafted schema
    then shows beside the fact."""
    chosen = [f for f in (facts if facts is not None else FACTS) if getattr(col, f) is not None]
    if not chosen:
        return col
    origins = dict(col.origins)
    for f in chosen:
        origins[f] = f"{origins.get(f) or 'contract'}; {DERIVED_LABEL}: {why}"
    return replace(col, origins=origins, derived={**col.derived, **{f: why for f in chosen}})


def derived_facts(facts: PublicFacts) -> tuple[tuple[str, str, str], ...]:
    """(column, fact, why) of every possibly data-derived fact, in column order."""
    return tuple((name, fact, why) for name, col in facts.columns.items() for fact, why in col.derived.items())


def from_flags(bounds: Mapping[str, tuple] | None, categories: Mapping[str, tuple[str, ...]] | None) -> PublicFacts:
    """The user's ``--bounds`` and ``--categories`` as public facts."""
    cols: dict[str, PublicColumn] = {}
    for name, (low, high) in (bounds or {}).items():
        cols[name] = PublicColumn(name, bounds=(low, high), origins={"bounds": "you gave --bounds"})
    for name, cats in (categories or {}).items():
        col = PublicColumn(name, categories=tuple(cats), origins={"categories": "you gave --categories"})
        cols[name] = merge_column(cols[name], col) if name in cols else col
    return PublicFacts(cols)
