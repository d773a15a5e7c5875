"""What dbt ``schema.yml`` files, Great Expectations suites and Frictionless table schemas state, as facts.

Pure functions from a parsed document to ``PublicColumn`` facts (``contracts`` finds and loads the
files). Only column-wide domain facts are read: a type, a list of accepted values, a range, not-null.
Tests and expectations about anything else (``unique``, ``relationships``, row counts, custom tests)
say nothing about a column's domain and are skipped; a KNOWN test that is malformed is refused
(``contract_facts``). A dbt test restricted to some rows (``where``) states nothing about the whole
column and is skipped too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privsynth.discovery.checks import check_facts
from privsynth.discovery.contract_facts import (
    BETWEEN,
    DBT_TESTS,
    DOMAIN_EXPECTATIONS,
    IN_SET,
    Where,
    combined,
    domain_fact,
    type_kind,
)
from privsynth.discovery.contract_trust import gx_profiler_entry
from privsynth.discovery.public import PublicColumn, PublicFacts, mark_derived

# ---------------------------------------------------------------- dbt

def dbt_column_facts(column: Any, model: str, where: Where) -> list[PublicColumn]:
    """The facts of one ``columns:`` entry of a dbt model: ``data_type``, its tests (``tests:`` and
    ``data_tests:``, with or without ``arguments:``) and its ``constraints`` (not_null, check)."""
    if not isinstance(column, dict) or not isinstance(column.get("name"), str):
        raise where.error(f"model {model!r}", f"a column entry needs a name, got {column!r}")
    name = column["name"]
    entry = f"model {model!r}, column {name!r}"
    facts: list[PublicColumn] = []
    if column.get("data_type") is not None:
        kind = type_kind(column["data_type"])
        if kind is not None:
            facts.append(PublicColumn(name, type=kind, origins={"type": where.origin("data_type")}))
    for key in ("tests", "data_tests"):
        tests = column.get(key) or []
        if not isinstance(tests, list):
            raise where.error(entry, f"{key} must be a list, got {tests!r}")
        facts += [f for t in tests if (f := _dbt_test(t, name, where, entry)) is not None]
    constraints = column.get("constraints") or []
    if not isinstance(constraints, list):
        raise where.error(entry, f"constraints must be a list, got {constraints!r}")
    for c in constraints:
        facts += _dbt_constraint(c, name, where, entry)
    return facts


def _dbt_test(test: Any, column: str, where: Where, entry: str) -> PublicColumn | None:
    if isinstance(test, str):
        name, args = test, {}
    elif isinstance(test, dict) and "test_name" in test:
        name, args = test["test_name"], {k: v for k, v in test.items() if k != "test_name"}
    elif isinstance(test, dict) and len(test) == 1:
        name, args = next(iter(test.items()))
        args = {} if args is None else args
    else:
        raise where.error(entry, f"a test is a name or {{name: arguments}}, got {test!r}")
    if name not in DBT_TESTS:
        return None  # unique, relationships, custom tests: not about the column's domain
    if not isinstance(args, dict):
        raise where.error(f"{entry}, test {name}", f"arguments must be a mapping, got {args!r}")
    config = args.get("config") or {}
    if "arguments" in args:  # dbt >= 1.10: data_tests: [{accepted_values: {arguments: {values: [...]}}}]
        args = args["arguments"] or {}
        if not isinstance(args, dict):
            raise where.error(f"{entry}, test {name}", f"arguments must be a mapping, got {args!r}")
    if args.get("where") or (isinstance(config, dict) and config.get("where")):
        return None  # a test on some rows only states nothing about the whole column
    severity = str((config if isinstance(config, dict) else {}).get("severity", args.get("severity", "error")))
    if name == "not_null" and severity.lower() == "warn":
        return None  # a warning tolerates nulls
    return domain_fact(DBT_TESTS[name], column, args, where, f"{entry}, test {name}", name)


def _dbt_constraint(constraint: Any, column: str, where: Where, entry: str) -> list[PublicColumn]:
    if not isinstance(constraint, dict) or "type" not in constraint:
        raise where.error(entry, f"a constraint needs a type, got {constraint!r}")
    if constraint["type"] == "not_null":
        return [PublicColumn(column, nullable=False, origins={"nullable": where.origin("constraint not_null")})]
    if constraint["type"] == "check" and isinstance(constraint.get("expression"), str):
        return check_facts(constraint["expression"], {column}, where, "constraint check", f"{entry}, constraint check")
    return []


def dbt_models(doc: Mapping[str, Any], where: Where) -> dict[str, list]:
    """Model (and source table) name -> its ``columns:`` list, from a parsed schema.yml."""
    out: dict[str, list] = {}
    entries = [("models", m) for m in _listed(doc, "models", where)]
    for source in _listed(doc, "sources", where):
        entries += [("sources", t) for t in (source.get("tables") or [] if isinstance(source, dict) else [])]
    for key, model in entries:
        if not isinstance(model, dict) or not isinstance(model.get("name"), str):
            raise where.error(key, f"an entry needs a name, got {model!r}")
        if model["name"] in out:
            raise where.error(f"model {model['name']!r}", "is described twice")
        columns = model.get("columns") or []
        if not isinstance(columns, list):
            raise where.error(f"model {model['name']!r}", f"columns must be a list, got {columns!r}")
        out[model["name"]] = columns
    return out


def _listed(doc: Mapping[str, Any], key: str, where: Where) -> list:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise where.error(key, f"must be a list, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------- Great Expectations

def gx_facts(doc: Mapping[str, Any], where: Where) -> PublicFacts:
    """The domain expectations of a GX suite (1.x ``type`` or 0.x ``expectation_type``); others skipped.
    A suite whose meta says a profiler or data assistant made it has every fact marked data-derived
    (``contract_trust.gx_profiler_entry``)."""
    expectations = doc.get("expectations")
    if not isinstance(expectations, list):
        raise where.error("expectations", f"must be a list, got {type(expectations).__name__}")
    facts = []
    for i, e in enumerate(expectations):
        if not isinstance(e, dict):
            raise where.error(f"expectation {i}", f"must be a mapping, got {e!r}")
        kind = e.get("type", e.get("expectation_type"))
        if kind not in DOMAIN_EXPECTATIONS:
            continue
        kwargs = e.get("kwargs") or {}
        column = kwargs.get("column") if isinstance(kwargs, dict) else None
        if not isinstance(column, str):
            raise where.error(f"expectation {i} ({kind})", "needs kwargs with a column name")
        fact = domain_fact(kind, column, kwargs, where, f"expectation {i} ({kind}), column {column!r}", kind)
        facts += [fact] if fact is not None else []
    profiled = gx_profiler_entry(doc)
    if profiled is not None:  # rule 10: a profiled suite states what the rows held
        why = f"GX {where.path} {profiled}: a profiler or data assistant made the suite from data"
        facts = [mark_derived(f, why) for f in facts]
    return combined(facts, where)


# ---------------------------------------------------------------- Frictionless

FRICTIONLESS_TYPES = {"string": "categorical", "integer": "integer", "number": "float", "boolean": "boolean",
                      "date": "date", "datetime": "timestamp"}


def frictionless_facts(doc: Mapping[str, Any], where: Where) -> PublicFacts:
    """A Table Schema's fields: ``type``, ``constraints.required`` / ``enum`` / ``minimum`` / ``maximum``."""
    fields = doc.get("fields")
    if not isinstance(fields, list):
        raise where.error("fields", f"must be a list, got {type(fields).__name__}")
    facts: list[PublicColumn] = []
    for i, f in enumerate(fields):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise where.error(f"field {i}", f"needs a name, got {f!r}")
        name, entry = f["name"], f"field {f['name']!r}"
        kind = FRICTIONLESS_TYPES.get(f.get("type")) if "type" in f else None  # unstated: no type fact
        if kind is not None:
            facts.append(PublicColumn(name, type=kind, origins={"type": where.origin("type")}))
        constraints = f.get("constraints") or {}
        if not isinstance(constraints, dict):
            raise where.error(entry, f"constraints must be a mapping, got {constraints!r}")
        if constraints.get("required") is True:
            facts.append(PublicColumn(name, nullable=False, origins={"nullable": where.origin("constraints.required")}))
        if "enum" in constraints and kind != "boolean":
            facts.append(domain_fact(IN_SET, name, {"value_set": constraints["enum"]}, where,
                                     f"{entry}, constraints.enum", "constraints.enum"))
        if "minimum" in constraints or "maximum" in constraints:
            facts.append(domain_fact(BETWEEN, name, {"min_value": constraints.get("minimum"),
                                                     "max_value": constraints.get("maximum")},
                                     where, f"{entry}, constraints.minimum/maximum", "constraints.minimum/maximum"))
    return combined([f for f in facts if f is not None], where)
