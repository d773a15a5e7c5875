"""Schema model: every invalid schema is refused with a message that names the column and the problem."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from privsynth.schema import (
    MISSING_LABEL,
    OUT_OF_DOMAIN_LABEL,
    SchemaError,
    load_schema,
    parse_schema,
)


def one_column(column: dict) -> dict:
    return {"name": "t", "columns": [column]}


INVALID_COLUMNS = [
    ({"name": "c", "type": "categorical"}, "non-empty 'categories'"),
    ({"name": "c", "type": "categorical", "categories": []}, "non-empty 'categories'"),
    ({"name": "c", "type": "categorical", "categories": ["a", "b", "a"]}, "categories repeat ['a']"),
    ({"name": "c", "type": "categorical", "categories": ["a", MISSING_LABEL]}, "reserved"),
    ({"name": "c", "type": "categorical", "categories": [OUT_OF_DOMAIN_LABEL]}, "reserved"),
    ({"name": "c", "type": "categorical", "categories": ["a"], "on_out_of_domain": "clip"},
     "'clip' applies to numeric"),
    ({"name": "c", "type": "categorical", "categories": ["a"], "bounds": [0, 1]}, "not 'bounds' or 'bins'"),
    ({"name": "c", "type": "categorical", "categories": [1, 2]}, "valid string"),
    ({"name": "x", "type": "integer", "bins": [0, 1]}, "needs public 'bounds'"),
    ({"name": "x", "type": "float", "bounds": [0, 1]}, "needs public 'bounds'"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0, 2, 1, 2]}, "strictly increasing"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0, 1, 1, 2]}, "strictly increasing"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0, 1, 3]}, "must equal the bounds"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0.5, 1, 2]}, "must equal the bounds"),
    ({"name": "x", "type": "float", "bounds": [2, 0], "bins": [2, 0]}, "low < high"),
    ({"name": "x", "type": "float", "bounds": [0, float("inf")], "bins": [0, 1]}, "finite"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0]}, "at least two edges"),
    ({"name": "x", "type": "integer", "bounds": [0, 2], "bins": [0, 0.5, 2]}, "integer bin edges"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0, 2], "categories": ["a"]}, "not 'categories'"),
    ({"name": "x", "type": "integer", "bounds": [0, 2], "bins": [0, 2], "on_out_of_domain": "category"},
     "not become a category"),
    ({"name": "b", "type": "boolean", "categories": ["y", "n"]}, "takes no categories"),
    ({"name": "b", "type": "boolean", "on_out_of_domain": "clip"}, "'clip' applies to numeric"),
    ({"name": "x", "type": "float", "bounds": [0, 2], "bins": [0, 2], "colour": "red"}, "'colour'"),
    ({"name": "x", "type": "string"}, "'type'"),
    ({"name": "x", "type": "boolean", "on_out_of_domain": "drop"}, "'on_out_of_domain'"),
]


@pytest.mark.parametrize("column, problem", INVALID_COLUMNS)
def test_invalid_column_names_column_and_problem(column, problem):
    with pytest.raises(SchemaError) as info:
        parse_schema(one_column(column), origin="my.yaml")
    message = str(info.value)
    assert f"column {column['name']!r}" in message
    assert problem in message
    assert message.startswith("my.yaml: ")
    assert f"column {column['name']!r}: column" not in message
    assert isinstance(info.value, ValueError)


def test_invalid_column_among_others_is_named(tiny_schema_dict):
    tiny_schema_dict["columns"][3]["bins"] = [0, 50, 40, 100]
    with pytest.raises(SchemaError, match=r"column 'age': bin edges must be finite and strictly increasing"):
        parse_schema(tiny_schema_dict)


@pytest.mark.parametrize("raw, problem", [
    ({"name": "t", "columns": [{"name": "a", "type": "boolean"}, {"name": "a", "type": "boolean"}]},
     "column names repeat: ['a']"),
    ({"name": "t", "columns": [{"name": "a", "type": "boolean", "drop": True}]}, "every column is dropped"),
    ({"name": "t", "columns": [{"name": "a", "type": "boolean"}], "owner": "me"}, "field 'owner': Extra inputs"),
    ({"name": "t"}, "field 'columns'"),
    ({"name": "", "columns": [{"name": "a", "type": "boolean"}]}, "field 'name'"),
    ([{"name": "a"}], "must be a mapping"),
    (None, "must be a mapping"),
])
def test_invalid_schema_level(raw, problem):
    with pytest.raises(SchemaError) as info:
        parse_schema(raw)
    assert problem in str(info.value)


def test_dropped_column_needs_no_domain(tiny_schema):
    assert tiny_schema.column("id").drop
    assert [c.name for c in tiny_schema.kept_columns] == ["color", "size", "age", "score", "member"]
    assert tiny_schema.column_names[0] == "id"
    with pytest.raises(KeyError, match="nope"):
        tiny_schema.column("nope")


def test_labels_order(tiny_schema):
    assert tiny_schema.column("color").labels == ("red", "green", "blue", MISSING_LABEL, OUT_OF_DOMAIN_LABEL)
    assert tiny_schema.column("size").labels == ("S", "M", "L", "XL")
    assert tiny_schema.column("age").labels == ("[0, 18)", "[18, 40)", "[40, 65)", "[65, 100]")
    assert tiny_schema.column("score").labels == ("[0, 0.25)", "[0.25, 0.5)", "[0.5, 1]", MISSING_LABEL)
    assert tiny_schema.column("member").labels == ("false", "true", MISSING_LABEL)
    assert [tiny_schema.column(n).domain_levels for n in ("color", "size", "age", "score", "member")] == [3, 4, 4, 3, 2]
    ood_only = parse_schema(one_column({"name": "c", "type": "categorical", "categories": ["a"],
                                        "on_out_of_domain": "category"}))
    assert ood_only.columns[0].labels == ("a", OUT_OF_DOMAIN_LABEL)


def test_content_hash_stable_and_sensitive(tiny_schema_dict):
    base = parse_schema(tiny_schema_dict).content_hash()
    assert base == parse_schema(tiny_schema_dict).content_hash()
    assert len(base) == 64 and int(base, 16) >= 0
    edits = [
        lambda d: d.__setitem__("name", "tiny2"),
        lambda d: d.__setitem__("description", "other"),
        lambda d: d["columns"][1]["categories"].append("black"),
        lambda d: d["columns"][1].__setitem__("categories", ["green", "red", "blue"]),  # order is part of the codes
        lambda d: d["columns"][2].__setitem__("nullable", True),
        lambda d: d["columns"][3].__setitem__("bins", [0, 18, 41, 65, 100]),
        lambda d: d["columns"][3].__setitem__("on_out_of_domain", "fail"),
        lambda d: d["columns"][0].__setitem__("drop", False) or d["columns"][0].__setitem__("categories", ["p0"]),
        lambda d: d["columns"].reverse(),
    ]
    seen = {base}
    for edit in edits:
        import copy

        changed = copy.deepcopy(tiny_schema_dict)
        edit(changed)
        digest = parse_schema(changed).content_hash()
        assert digest not in seen
        seen.add(digest)


def test_schema_is_frozen(tiny_schema):
    with pytest.raises(ValidationError):  # a frozen pydantic model refuses the assignment
        tiny_schema.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        tiny_schema.columns[1].nullable = False  # type: ignore[misc]


def test_load_schema_errors(tmp_path):
    with pytest.raises(SchemaError, match="does not exist"):
        load_schema(tmp_path / "missing.yaml")
    with pytest.raises(SchemaError, match="does not exist"):
        load_schema(tmp_path)  # a folder is not a schema file
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\ncolumns: [\n  - name: a\n")
    with pytest.raises(SchemaError, match="not valid YAML"):
        load_schema(bad)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SchemaError):
        load_schema(binary)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(SchemaError, match="must be a mapping"):
        load_schema(empty)
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("name: t\ncolumns:\n  - name: colour\n    type: categorical\n")
    with pytest.raises(SchemaError, match=r"invalid.yaml: column 'colour': a categorical column needs"):
        load_schema(invalid)


def test_load_schema_round_trip(tmp_path, tiny_schema):
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_schema.model_dump(mode="json")))
    assert load_schema(path) == tiny_schema
    assert load_schema(path).content_hash() == tiny_schema.content_hash()


def test_adult_schema(adult_schema_path):
    schema = load_schema(adult_schema_path)
    assert schema.name == "adult"
    sizes = {c.name: len(c.labels) for c in schema.kept_columns}
    assert sizes == {
        "age": 13, "workclass": 9, "fnlwgt": 8, "education": 16, "education_num": 16, "marital_status": 7,
        "occupation": 15, "relationship": 6, "race": 5, "sex": 2, "capital_gain": 6, "capital_loss": 5,
        "hours_per_week": 9, "native_country": 42, "income": 2,
    }
    assert schema.column("workclass").labels[-1] == MISSING_LABEL
    assert schema.column("age").labels[-1] == "[75, 90]"


def test_bundled_adult_schema_matches(adult_schema_path):
    bundled = adult_schema_path.parents[1] / "privsynth" / "data" / "adult.yaml"
    assert load_schema(bundled).content_hash() == load_schema(adult_schema_path).content_hash()


# ---------------------------------------------------------------- dates and timestamps

def test_date_and_timestamp_columns_take_iso_bounds_and_calendar_bins():
    import yaml

    schema = parse_schema(yaml.safe_load("""
name: t
columns:
  - {name: opened, type: date, bounds: [2010-01-01, 2020-12-31], bin_by: year, nullable: true}
  - {name: q, type: date, bounds: ["2019-01-15", "2019-12-31"], bin_by: quarter}
  - {name: w, type: date, bounds: ["2024-01-03", "2024-02-01"], bin_by: week}
  - {name: at, type: timestamp, bounds: ["2019-01-01", "2019-01-03T12:00:00"], bin_by: day, on_out_of_domain: clip}
  - {name: m, type: date, bounds: ["2019-11-10", "2020-02-01"], bins: ["2019-11-10", "2020-01-01", "2020-02-01"]}
"""))
    opened, q, w, at, m = schema.columns
    assert opened.bounds == (14610.0, 18627.0)  # days since 1970-01-01
    assert opened.labels[0] == "[2010-01-01, 2011-01-01)" and opened.labels[-2:] == ("[2020-01-01, 2020-12-31]",
                                                                                     MISSING_LABEL)
    assert q.labels == ("[2019-01-15, 2019-04-01)", "[2019-04-01, 2019-07-01)", "[2019-07-01, 2019-10-01)",
                        "[2019-10-01, 2019-12-31]")
    assert w.labels[:2] == ("[2024-01-03, 2024-01-08)", "[2024-01-08, 2024-01-15)")  # weeks start on Monday
    assert at.bins[0] == 1546300800.0  # seconds since the epoch, UTC
    assert at.labels == ("[2019-01-01, 2019-01-02)", "[2019-01-02, 2019-01-03)", "[2019-01-03, 2019-01-03T12:00:00]")
    assert m.labels == ("[2019-11-10, 2020-01-01)", "[2020-01-01, 2020-02-01]")
    # a dumped schema (numbers in the unit, bins and bin_by) reads back as the same schema
    assert parse_schema(schema.model_dump(mode="json")) == schema


@pytest.mark.parametrize("column, problem", [
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31"]}, "needs public 'bounds'"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "yesterday"], "bin_by": "year"}, "not an ISO date"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31T10:00:00"], "bin_by": "year"}, "time of day"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31"], "bin_by": "decade"}, "bin_by"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31"], "bin_by": "month",
      "bins": ["2019-01-01", "2019-12-31"]}, "either 'bins' or 'bin_by'"),
    ({"name": "d", "type": "date", "bounds": ["2019-12-31", "2019-01-01"], "bin_by": "month"}, "low < high"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31"],
      "bins": ["2019-01-01", "2019-06-01", "2019-12-30"]},
     "must equal the bounds"),
    ({"name": "d", "type": "date", "bounds": ["2019-01-01", "2019-12-31"], "bin_by": "year",
      "on_out_of_domain": "category"}, "'fail' or 'clip'"),
    ({"name": "t", "type": "timestamp", "bounds": ["2019-01-01", "2019-01-01T00:00:00.5"], "bin_by": "day"},
     "whole seconds"),
    ({"name": "x", "type": "integer", "bounds": [0, 2], "bins": [0, 2], "bin_by": "year"}, "'bin_by' applies to date"),
])
def test_invalid_date_columns_are_refused_naming_the_column(column, problem):
    with pytest.raises(SchemaError) as info:
        parse_schema(one_column(column))
    assert f"column {column['name']!r}" in str(info.value) and problem in str(info.value)


def test_an_empty_category_list_holds_only_out_of_domain_values():
    schema = parse_schema({"name": "t", "columns": [
        {"name": "c", "type": "categorical", "categories": [], "on_out_of_domain": "category", "nullable": True}]})
    assert schema.columns[0].labels == (MISSING_LABEL, OUT_OF_DOMAIN_LABEL) and schema.columns[0].domain_levels == 0
