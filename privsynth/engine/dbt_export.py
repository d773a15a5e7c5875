"""A schema's checks as a dbt ``schema.yml`` (``privsynth schema expectations --format dbt``).

The dbt twin of the GX suite (``expectations``): one model named as the schema, and per kept column
its ``data_type``, ``accepted_values`` (categories; a coded numeric column's values, unquoted),
``dbt_utils.accepted_range`` (numeric and temporal bounds, dates as SQL literals) and ``not_null``.
A check the schema enforces (``on_out_of_domain: fail``, a column that is not nullable) is an error
test, as in the suite; a domain the run maps values onto (``category``, ``clip``) is stated with
``severity: warn``, so a warehouse sees what privsynth will do and ``--public`` reads the same facts
back. Tests use dbt >= 1.10's ``data_tests:`` with ``arguments:``. No data is read.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from privsynth.schema import Column, Schema, temporal
from privsynth.schema.stored import sql_type

SQL_TYPES = {"categorical": "varchar", "integer": "bigint", "float": "double", "boolean": "boolean",
             "date": "date", "timestamp": "timestamp"}


def _test(name: str, arguments: dict[str, Any] | None, enforced: bool) -> dict | str:
    body: dict[str, Any] = {}
    if arguments:
        body["arguments"] = arguments
    if not enforced:
        body["config"] = {"severity": "warn"}
    return {name: body} if body else name


def _number(col: Column, x: float) -> int | float:
    return int(x) if col.type == "integer" and float(x).is_integer() else float(x)


def column_tests(col: Column) -> list[dict | str]:
    """The dbt tests of one kept column (module docstring)."""
    enforced = col.on_out_of_domain == "fail"
    tests: list[dict | str] = []
    if col.type == "categorical" and col.categories:
        tests.append(_test("accepted_values", {"values": list(col.categories)}, enforced))
    elif col.type == "boolean" and enforced:
        tests.append(_test("accepted_values", {"values": [True, False], "quote": False}, True))
    elif col.values is not None:  # a coded column: exactly these numbers
        tests.append(_test("accepted_values", {"values": [_number(col, v) for v in col.values], "quote": False},
                           enforced))
    elif col.bounds is not None and col.type in temporal.TEMPORAL_TYPES:
        low, high = (f"'{temporal.format_unit(x, col.type)}'" for x in col.bounds)  # SQL literals
        tests.append(_test("dbt_utils.accepted_range", {"min_value": low, "max_value": high}, enforced))
    elif col.bounds is not None:
        low, high = (_number(col, x) for x in col.bounds)
        tests.append(_test("dbt_utils.accepted_range", {"min_value": low, "max_value": high}, enforced))
    if not col.nullable:
        tests.append("not_null")
    return tests


def dbt_schema(schema: Schema) -> dict:
    """The schema.yml document: one model, its kept columns with types and tests."""
    columns = []
    for col in schema.kept_columns:
        entry: dict[str, Any] = {"name": col.name, "data_type": SQL_TYPES[col.type] if col.stored_as is None
                                 else sql_type(col.stored_as)}
        if col.description:
            entry["description"] = col.description
        tests = column_tests(col)
        if tests:
            entry["data_tests"] = tests
        columns.append(entry)
    model = {"name": schema.name, "description": f"privsynth schema {schema.name!r}",
             "meta": {"privsynth_schema": schema.name, "privsynth_schema_hash": schema.content_hash()},
             "columns": columns}
    return {"version": 2, "models": [model]}


def dbt_schema_yaml(schema: Schema) -> str:
    """The schema.yml text, with a header saying where it comes from."""
    head = (f"# dbt schema.yml written by `privsynth schema expectations --format dbt` from schema {schema.name!r}:\n"
            "# the schema's checks as dbt tests (severity warn: values privsynth maps onto the domain).\n")
    return head + yaml.safe_dump(dbt_schema(schema), sort_keys=False, allow_unicode=True, width=120)


def expectations_text(schema: Schema, form: str = "gx") -> tuple[str, str]:
    """What ``privsynth schema expectations`` writes (``gx``: the suite's JSON; ``dbt``: the schema.yml) and a
    short description of it."""
    if form == "dbt":
        return dbt_schema_yaml(schema), f"dbt schema.yml, model {schema.name!r}"
    from privsynth.engine.expectations import suite_json
    from privsynth.io.atomic import json_default

    suite = suite_json(schema)
    return (json.dumps(suite, indent=2, default=json_default) + "\n",
            f"{len(suite['expectations'])} expectations, suite {suite['name']!r}")
