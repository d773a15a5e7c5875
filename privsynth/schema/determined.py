"""Columns a schema states are determined by another (``determined_by``): public structural zeros.

Documentation often says that one column is a function of another: an age group of the age, an education group
of the years of schooling, an education code per education level. ``determined_by`` writes that down:

    - name: ageGroup
      type: categorical
      categories: [18-29, 30-39, 40-49, 50-59, 60+]
      determined_by: {column: age, levels: {18-29: [18, 30], 30-39: [30, 40], 40-49: [40, 50], 50-59: [50, 60],
                                            60+: [60, 90]}}

Each key is a level of this column (a category or coded value; for a binned number column a value, naming
the bin that holds it); each value lists the source column's values that give it: an interval [low, high) of
a binned number column whose ends are its bin edges (the last bin's top edge belongs to the last bin), else
its categories (``true`` / ``false`` for a boolean) or coded values. A source level no key lists is
unconstrained, and so are ``<missing>`` and ``<out-of-domain>`` on either side.

The rule makes the forbidden cells of the pair's 2-way marginal structural zeros, a PUBLIC fact of the
schema: no row is read to find them. A mechanism that takes them (aim) holds them at zero in its model from
the start, so no synthetic record pairs an age of 35 with the group 18-29; otherwise the noise of every
measurement that holds the pair puts mass there (gss_vocab at epsilon 1: 5.8% of the records). Rows that break
the stated rule are read as they are (a dirty record is never a failure) and the release holds none like
them. The rounding stage keeps the zeros when it replaces an unsupported ``<missing>`` value
(``rounding.suppress_levels``). Other mechanisms release as if the schema stated nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

Value = bool | str | float


class DeterminedBy(BaseModel):
    """``determined_by`` of a column: its source column and, per level of this column, the source's values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    column: str = Field(min_length=1)
    levels: tuple[tuple[Value, tuple[Value, ...]], ...] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _pairs(cls, data: object) -> object:
        """A YAML mapping {level: [source values]} as (level, values) pairs, in the file's order."""
        if isinstance(data, dict) and isinstance(data.get("levels"), dict):
            pairs = tuple((key, tuple(v) if isinstance(v, (list, tuple)) else (v,))
                          for key, v in data["levels"].items())
            return dict(data, levels=pairs)
        return data


@dataclass(frozen=True, eq=False)
class StructuralZeros:
    """The cells of a 2-way marginal that a schema's ``determined_by`` forbids (public).

    ``attributes``: the two kept columns' indices in the domain, ascending; ``allowed``: a boolean table over
    their level codes (``Column.labels`` order, structural levels included), False where the rule forbids."""

    attributes: tuple[int, int]
    names: tuple[str, str]
    allowed: np.ndarray

    @property
    def forbidden_cells(self) -> int:
        return int((~self.allowed).sum())


DETERMINABLE = ("categorical", "boolean", "integer", "float")


class Column(Protocol):
    """What a rule reads of a column (``schema.model.Column``, which holds the rule: no import back)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def drop(self) -> bool: ...

    @property
    def categories(self) -> tuple[str, ...] | None: ...

    @property
    def values(self) -> tuple[float, ...] | None: ...

    @property
    def bins(self) -> tuple[float, ...] | None: ...

    @property
    def determined_by(self) -> DeterminedBy | None: ...

    @property
    def labels(self) -> tuple[str, ...]: ...

    @property
    def domain_levels(self) -> int: ...


class Schema(Protocol):
    @property
    def kept_columns(self) -> tuple[Column, ...]: ...


def number_label(x: float) -> str:
    """A number as a schema's labels and messages write it: 3, not 3.0; 0.25 as it is (``Column.labels``)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else number_label(value)


def _number(value: Value, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    return number


def level_of(col: Column, value: Value, where: str) -> int:
    """The level code of ``value`` in ``col``: a category's (or a boolean's) index, a coded value's, or the index
    of the bin that holds a number (the last bin holds its top edge)."""
    if col.type == "categorical":
        labels = list(col.categories or ())
        if _text(value) not in labels:
            raise ValueError(f"{where}: {_text(value)!r} is not a category of column {col.name!r} (expected one of "
                             f"{labels})")
        return labels.index(_text(value))
    if col.type == "boolean":
        if _text(value).lower() not in ("true", "false"):
            raise ValueError(f"{where}: a boolean column's values are true and false, got {value!r}")
        return int(_text(value).lower() == "true")
    number = _number(value, where)
    if col.values is not None:
        if number not in col.values:
            raise ValueError(f"{where}: {_text(value)!r} is not a value of column {col.name!r} (expected one of "
                             f"{[number_label(v) for v in col.values]})")
        return list(col.values).index(number)
    edges = list(col.bins or ())
    if not edges[0] <= number <= edges[-1]:
        raise ValueError(f"{where}: {_text(value)!r} lies outside column {col.name!r}'s bounds "
                         f"[{number_label(edges[0])}, {number_label(edges[-1])}]")
    return min(int(np.searchsorted(edges, number, side="right")) - 1, len(edges) - 2)


def source_levels(source: Column, spec: tuple[Value, ...], where: str) -> list[int]:
    """The source's level codes ``spec`` names: an interval [low, high) of bin edges for a binned number column,
    else its categories or coded values."""
    if source.type in ("integer", "float") and source.values is None:
        edges = list(source.bins or ())
        if len(spec) != 2:
            raise ValueError(f"{where}: a binned number column's values are an interval [low, high) of its bin "
                             f"edges {[number_label(e) for e in edges]}, got {list(spec)}")
        low, high = (_number(v, where) for v in spec)
        if low not in edges or high not in edges or not low < high:
            raise ValueError(f"{where}: [{number_label(low)}, {number_label(high)}) must run between two of column "
                             f"{source.name!r}'s bin edges {[number_label(e) for e in edges]}, low before high")
        return list(range(edges.index(low), edges.index(high)))
    return [level_of(source, v, where) for v in spec]


def level_map(col: Column, source: Column) -> dict[int, int]:
    """Source level code -> this column's level code, from ``col.determined_by`` (checked: ValueError naming
    what was expected)."""
    rule = col.determined_by
    if rule is None:
        return {}
    out: dict[int, int] = {}
    own_seen: set[int] = set()
    for key, spec in rule.levels:
        where = f"column {col.name!r} determined_by level {_text(key)!r}"
        own = level_of(col, key, where)
        if own in own_seen:
            raise ValueError(f"{where}: names a level of {col.name!r} another key already names")
        own_seen.add(own)
        for s in source_levels(source, spec, where):
            if s in out:
                raise ValueError(f"{where}: source level {source.labels[s]!r} of {source.name!r} is listed "
                                 "under two levels; each source value gives one level")
            out[s] = own
    return out


def check_determinations(columns: Sequence[Column]) -> None:
    """Every kept column's ``determined_by`` against the schema's columns (ValueError naming what was expected)."""
    by_name = {c.name: c for c in columns}
    for col in columns:
        if col.drop or col.determined_by is None:
            continue
        name = col.determined_by.column
        where = f"column {col.name!r} determined_by"
        source = by_name.get(name)
        if source is None:
            raise ValueError(f"{where}: no column {name!r} in the schema (expected one of {sorted(by_name)})")
        if source.name == col.name:
            raise ValueError(f"{where}: a column cannot be determined by itself")
        if source.drop:
            raise ValueError(f"{where}: column {name!r} is dropped; the source must be kept")
        if source.type not in DETERMINABLE:
            raise ValueError(f"{where}: the source must be a {', '.join(DETERMINABLE)} column, {name!r} is "
                             f"{source.type}")
        level_map(col, source)


def structural_zeros(schema: Schema) -> tuple[StructuralZeros, ...]:
    """The schema's structural zeros (public: from ``determined_by`` alone), one per determined column."""
    kept = schema.kept_columns
    index = {c.name: j for j, c in enumerate(kept)}
    out = []
    for i, col in enumerate(kept):
        if col.determined_by is None:
            continue
        j = index[col.determined_by.column]
        source = kept[j]
        allowed = np.ones((len(col.labels), len(source.labels)), dtype=bool)
        for s, own in level_map(col, source).items():
            allowed[: col.domain_levels, s] = False
            allowed[own, s] = True
        if i < j:
            out.append(StructuralZeros((i, j), (col.name, source.name), allowed))
        else:
            out.append(StructuralZeros((j, i), (source.name, col.name), allowed.T.copy()))
    return tuple(out)

