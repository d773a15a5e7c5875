"""The schema's expectations (:mod:`privsynth.engine.expectations`) run in place as ONE aggregate query.

Each expectation of ``schema_expectations(schema)`` becomes a count of the rows failing it, computed on
the backend; the report has the same public JSON and one-line, value-free messages whichever way the
expectations run. Semantics follow the encoder (``engine.binning``), so a table that passes encodes
without a fault: categorical values compare as the encoder reads them, booleans accept true/false/1/0
in any case, numeric text must parse as a number (the type check), NaN counts as missing.

Refused before any row is read (``open_source``): missing columns, repeated names, and column types no
schema column can read (so the unique-names expectation passes here by construction). Counts stay in
the internal ``to_json`` form; ``public_json`` has none.
"""

from __future__ import annotations

import ibis

from privsynth.engine import expectations as ex
from privsynth.engine.binning import Fault
from privsynth.engine.expectations import Expectation, ExpectationOutcome, ValidationReport, outcome
from privsynth.engine.values import finite, is_whole
from privsynth.schema import Column

_ROWS = "rows"


def _count(condition) -> ibis.Value:
    return ibis.ifelse(condition, 1, 0).sum()


def _failing(source, j: int, col: Column, e: Expectation, values) -> ibis.Value | None:
    """The count of rows failing ``e`` on kept column ``j`` (None: nothing to count, it passes)."""
    present = ~values.missing
    x = values.value
    number = present & x.notnull() if x is not None else None
    kind = e.kind
    if kind == ex.TYPE_LIST:
        return None if values.not_a_number is None else _count(values.not_a_number)
    if kind == ex.FINITE:
        return _count(number & x.isinf())
    if kind == ex.WHOLE_NUMBERS:
        return _count(number & finite(x) & ~is_whole(x))
    if kind == ex.BETWEEN:
        low, high = col.bounds  # type: ignore[misc]
        return _count(number & ((x < low) | (x > high)))
    if kind == ex.IN_SET:
        return _count(present & (source.bins.codes[j] == int(Fault.OUT_OF_DOMAIN)))
    if kind == ex.MOSTLY_IN_DOMAIN:
        return _count(present & (source.bins.codes[j] == len(col.labels) - 1))
    if kind == ex.NOT_NULL:
        return _count(values.missing)
    if kind == ex.NON_NULL_PROPORTION:
        return None  # from the column's present count
    raise AssertionError(f"no aggregate for expectation {kind!r}")  # a new kind needs its count here


def validate_source(source) -> ValidationReport:
    """Check ``source`` (an open :class:`~privsynth.engine.statistics.Source`) against its schema."""
    schema = source.schema
    expectations = ex.schema_expectations(schema)
    kept = {c.name: (j, c) for j, c in enumerate(schema.kept_columns)}
    table = source.bins.table  # the source's table, with the read values the codes are computed from
    metrics: dict[str, ibis.Value] = {_ROWS: table.count()}
    for name, (j, col) in kept.items():
        values = source.bins.values[j]  # read once, as the codes read it
        metrics[f"p{j}"] = _count(~values.missing)
        for i, e in enumerate(expectations):
            if e.column == name and (count := _failing(source, j, col, e, values)) is not None:
                metrics[f"e{i}"] = count
    row = source._run(table.aggregate(**metrics)).to_pylist()[0]
    n = int(row[_ROWS] or 0)
    results = [_outcome(e, row.get(f"e{i}"), row, n, schema, kept, list(source.table.columns))
               for i, e in enumerate(expectations) if e.column is None or n > 0]
    return ValidationReport(success=all(r.success for r in results), results=tuple(results),
                            schema_name=schema.name, schema_hash=schema.content_hash())


def _outcome(e: Expectation, bad, row: dict, n: int, schema, kept: dict, names: list[str]) -> ExpectationOutcome:
    if e.kind == ex.UNIQUE_COLUMN_NAMES:
        return outcome(e.kind, None, True, schema)  # repeats are refused at open
    if e.kind == ex.ROWS:
        return outcome(e.kind, None, n > 0, schema, elements=n)
    if e.kind == ex.COLUMN_SET:
        return ex.column_set_outcome(names, schema)
    j, col = kept[e.column]
    present = int(row[f"p{j}"] or 0)
    bad = int(bad or 0)
    pct = 100.0 * bad / present if present else 0.0  # GX: relative to the non-missing values
    if e.kind == ex.NON_NULL_PROPORTION:
        return outcome(e.kind, col.name, present > 0, schema, None, None, n)
    if e.kind == ex.NOT_NULL:
        return outcome(e.kind, col.name, bad == 0, schema, bad, 100.0 * bad / n, n)  # GX: relative to all rows
    if e.kind == ex.MOSTLY_IN_DOMAIN:
        return outcome(e.kind, col.name, ex.mostly_in_domain(bad, present), schema, bad, pct, n)
    return outcome(e.kind, col.name, bad == 0, schema, bad, pct, n)


__all__ = ["validate_source"]
