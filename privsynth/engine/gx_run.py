"""The schema's suite (:func:`privsynth.engine.expectations.gx_suite`) run by Great Expectations 1.x.

A real GX validation (an ephemeral data context, a pandas datasource, ``batch.validate(suite)``), used
on every run's synthetic table: a synthetic table that fails its own schema is a bug. Results are
reduced to a whitelist (success, unexpected_count, unexpected_percent, element_count); value samples,
observed values, exception texts and tracebacks (which can quote values) are dropped, the same
discipline as for the private input although the synthetic table is public.

Cost: importing GX takes a few seconds once per process; validating a table of tens of thousands of
rows then takes well under a second.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from privsynth.engine import expectations as ex
from privsynth.engine.expectations import ExpectationOutcome, ValidationReport, outcome
from privsynth.schema import Schema

_SAFE_RESULT_KEYS = ("unexpected_count", "unexpected_percent", "element_count")


def _context():
    ex.gx_module()
    from great_expectations import get_context
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(), analytics_enabled=False,
                               progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False))
    return get_context(mode="ephemeral", project_config=config)


def _raised(info: Any) -> bool:
    """Whether a GX result records an exception: flat ({'raised_exception': ...}) or per metric."""
    if not info:
        return False

    def flag(x: Any) -> bool:
        value = x.get("raised_exception") if isinstance(x, dict) else getattr(x, "raised_exception", None)
        return bool(value) and value != "False"
    return flag(info) or any(flag(v) for v in info.values())


def _whole(x: Any) -> int | None:
    return None if x is None else int(x)


def _reduce(r: Any, schema: Schema, names: list[str], synthetic: bool) -> ExpectationOutcome:
    config = r.expectation_config
    kind = (config.meta or {}).get("privsynth", config.type)
    column = config.kwargs.get("column")
    if kind == ex.COLUMN_SET:
        # GX's observed value lists the names; ours withholds names that may be a data row
        return ex.column_set_outcome(names, schema, synthetic)
    if _raised(r.exception_info):
        return outcome(kind, column, False, schema,
                       text=f"{'table' if column is None else f'column {column!r}'}: {kind} could not be evaluated "
                            "(values of a type the check cannot handle)")
    safe = {k: (r.result or {}).get(k) for k in _SAFE_RESULT_KEYS}
    percent = safe["unexpected_percent"]
    elements = _whole(safe["element_count"])
    if kind == ex.ROWS:
        elements = _whole((r.result or {}).get("observed_value"))  # the row count itself
    return outcome(kind, column, bool(r.success), schema, _whole(safe["unexpected_count"]),
                   None if percent is None else float(percent), elements)


def gx_validate(frame: pd.DataFrame, schema: Schema, synthetic: bool = False) -> ValidationReport:
    """Validate ``frame`` with GX against the schema's suite; engine-only expectations are not in it.
    ``synthetic``: the suite of a synthetic table (the kept columns only)."""
    context = _context()
    batch_definition = (context.data_sources.add_pandas("privsynth").add_dataframe_asset("table")
                        .add_batch_definition_whole_dataframe("whole"))
    names = [str(c) for c in frame.columns]
    try:
        batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
        # BASIC is the least verbose format with counts; the value sample it adds is dropped in _reduce.
        result = batch.validate(ex.gx_suite(schema, synthetic),
                                result_format={"result_format": "BASIC", "partial_unexpected_count": 0})
    except Exception as err:  # noqa: BLE001
        # Not chained: GX's message or traceback locals could quote data values into logs.
        raise RuntimeError(f"Great Expectations failed while validating against schema {schema.name!r} "
                           f"({type(err).__name__})") from None
    order = {(e.kind, e.column): i for i, e in enumerate(ex.schema_expectations(schema, synthetic))}
    # As in the engine: a missing column is the column-set check's to report, and column checks need a row.
    results = sorted((_reduce(r, schema, names, synthetic) for r in result.results
                      if (column := r.expectation_config.kwargs.get("column")) is None
                      or (column in names and len(frame))),
                     key=lambda o: order.get((o.expectation_type, o.column), len(order)))
    return ValidationReport(success=all(r.success for r in results), results=tuple(results),
                            schema_name=schema.name, schema_hash=schema.content_hash())


def engine_only(schema: Schema) -> list[dict]:
    """The schema's expectations GX does not run, and why (stated next to a GX report)."""
    return [{"expectation_type": e.kind, "column": e.column, "reason": e.engine_only}
            for e in ex.schema_expectations(schema) if not e.gx]


__all__ = ["engine_only", "gx_validate"]
