"""The storage type each column of a run's synthetic table is written in (``privsynth.schema.stored``).

The schema's ``stored_as`` where it says one; for a schema that leaves it unsaid (one written from documentation),
the source's declared type where it is not the pipeline's own: a warehouse job's NUMERIC(12, 2) comes back as
NUMERIC(12, 2) whether or not its schema names it. A declared type is the source's structure, the same for a table
and its neighbour (rule 9), so it is public. A pandas frame declares none: its dtypes are what the code that built it
inferred from the rows (one missing value makes an int64 column float64, rule 10), and a CSV declares none (text).
"""

from __future__ import annotations

from typing import Any

from privsynth.schema import Schema
from privsynth.schema.stored import stored_form


def declares_storage(data: Any) -> bool:
    """Whether the run's input declares its storage types: a file, a table or an Arrow table does; a pandas frame
    does not (its dtypes follow its values: a column with a missing value is float64, without one int64)."""
    return not type(data).__module__.startswith("pandas")


def declared_forms(schema: Schema, declared: dict[str, str]) -> dict[str, str]:
    """Each kept column's storage form: its ``stored_as``, else the form of its ``declared`` type (column name -> the
    source's declared type) where that is not the pipeline's own; none for a column with a written ``format``
    (stored as text)."""
    forms = {}
    for col in schema.kept_columns:
        if col.stored_as is not None:
            forms[col.name] = col.stored_as
        elif col.format is None and col.name in declared:
            form = stored_form(declared[col.name], col.type)
            if form is not None:
                forms[col.name] = form
    return forms


def run_storage_forms(ctx) -> dict[str, str]:
    """The storage forms of a run's synthetic table: ``declared_forms`` with the run's source's declared types
    (metadata only: the engine's opened table), where the source declares them."""
    if not declares_storage(ctx.data):
        return declared_forms(ctx.schema, {})
    source = ctx.handle()
    if getattr(source.opened, "text_from_csv", False):
        return declared_forms(ctx.schema, {})
    return declared_forms(ctx.schema, {str(name): str(dtype) for name, dtype in source.opened.table.schema().items()})
