"""Resource limits, checked from the schema and the parameters before any data is read or budget spent.

A hostile or mistaken input must fail fast with one line, not after the charge: a header of 10^6
columns, a column with 200,000 categories (charged, then out of memory), an output path that climbs
out of the working folder through a deployment's form. Each limit is documented here and can be
raised through its environment variable by an operator who means it.

| limit | default | environment variable |
|---|---|---|
| kept columns in a schema | 500 | PRIVSYNTH_MAX_COLUMNS |
| levels of one column (categories or bins, + missing / out-of-domain) | 2,000 | PRIVSYNTH_MAX_LEVELS |
| one-hot width of the whole table (sum of levels) | 20,000 | PRIVSYNTH_MAX_WIDTH |
| columns in an input's header (read before anything else) | 10,000 | PRIVSYNTH_MAX_INPUT_COLUMNS |
"""

from __future__ import annotations

import os
from pathlib import PurePath

from privsynth.errors import LimitError  # noqa: F401  (re-exported: raised here)
from privsynth.schema import Schema, SchemaError

DEFAULTS = {"PRIVSYNTH_MAX_COLUMNS": 500, "PRIVSYNTH_MAX_LEVELS": 2_000, "PRIVSYNTH_MAX_WIDTH": 20_000,
            "PRIVSYNTH_MAX_INPUT_COLUMNS": 10_000}


def limit(name: str) -> int:
    """The limit in force (the environment variable if set to a positive integer, else the default)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        raise LimitError(f"{name}={raw!r} is not an integer") from None
    if value < 1:
        raise LimitError(f"{name} must be >= 1, got {value}")
    return value


def check_schema_limits(schema: Schema) -> None:
    """Refuse a schema whose domain is beyond the limits (the message names the column and the limit)."""
    kept = schema.kept_columns
    if len(kept) > limit("PRIVSYNTH_MAX_COLUMNS"):
        raise LimitError(f"schema {schema.name!r} keeps {len(kept)} columns; the limit is "
                         f"{limit('PRIVSYNTH_MAX_COLUMNS')} (PRIVSYNTH_MAX_COLUMNS); drop or exclude columns")
    max_levels = limit("PRIVSYNTH_MAX_LEVELS")
    for column in kept:
        levels = len(column.labels)
        if levels > max_levels:
            raise LimitError(
                f"column {column.name!r} has {levels} levels; the limit is {max_levels} (PRIVSYNTH_MAX_LEVELS): a "
                "column this fine-grained gets almost no signal through the noise; exclude it (drop: true), merge "
                "categories, or use fewer bins")
    width = sum(len(c.labels) for c in kept)
    if width > limit("PRIVSYNTH_MAX_WIDTH"):
        raise LimitError(f"schema {schema.name!r} has {width} levels in all; the limit is "
                         f"{limit('PRIVSYNTH_MAX_WIDTH')} (PRIVSYNTH_MAX_WIDTH)")


def check_safe_path(path: str, what: str) -> None:
    """Refuse a path with a '..' segment: through a deployment's form it would write outside its folder."""
    if "://" in path and not path.lower().startswith(("duckdb:", "file://")):
        return  # a URL (object store, database): no local path to climb out of
    local = path.split(":", 1)[1] if path.lower().startswith("duckdb:") else path
    local = local.split("?", 1)[0]
    if ".." in PurePath(local).parts:
        raise SchemaError(f"{what}: path {path!r} contains '..'; give a path inside the working folder or an "
                          "absolute path")
