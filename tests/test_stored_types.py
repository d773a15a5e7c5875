"""The source's storage types kept by the synthetic table (``privsynth.schema.stored``, docs/design.md 3).

Money stored as DECIMAL(12, 2) came back as doubles, a UINT8 code and an INT16 as BIGINT, a REAL as a double and an
aware moment as naive wall time: the same values, another schema, which a warehouse job loading the release into the
source's table rejects or silently converts. The declared types are the source's structure (metadata, the same for a
table and its neighbour), so the discovered schema records them (``stored_as``) and the synthetic table is written in
them; writing is total (a DP edge past what the type holds is clipped to it).
"""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import privsynth
from privsynth.errors import SchemaError
from privsynth.schema import parse_schema
from privsynth.schema.stored import as_stored, declared_form, from_stored, parse_form, stored_form


@pytest.mark.parametrize(("declared", "form"), [
    ("decimal(12, 2)", "decimal(12,2)"), ("!decimal(38, 0)", "decimal(38,0)"), ("uint8", "uint8"), ("int16", "int16"),
    ("float32", "float32"), ("float64", "float64"), ("date", "date32"), ("timestamp('UTC', 6)", "timestamp(us, UTC)"),
    ("timestamp(9)", "timestamp(ns)"), ("timestamp(0)", "timestamp(s)"), ("timestamp", "timestamp(us)"),
    ("string", None), ("boolean", None), ("array<int64>", None)])
def test_a_declared_type_s_storage_form(declared, form):
    assert declared_form(declared) == form
    if form is not None:
        parse_form(form)  # every form it writes, the schema reads


def test_a_storage_form_is_written_only_where_it_is_not_the_pipeline_s_own():
    assert stored_form("int64", "integer") is None and stored_form("float64", "float") is None
    assert stored_form("timestamp(6)", "timestamp") is None and stored_form("date", "date") is None
    assert stored_form("float64", "integer") == "float64"  # whole numbers a source stores as doubles stay doubles
    assert stored_form("uint64", "float") == "uint64"      # integers past int64 (written as doubles) stay uint64
    assert stored_form("timestamp(6)", "date") == "timestamp(us)"  # dates stored as moments stay moments
    assert stored_form("int32", "categorical") is None


def test_writing_in_a_storage_type_is_total():
    """Values past what the type holds are clipped to it (a DP bin's edge can pass UINT8's 255 or a decimal's digits);
    a decimal is rounded to its scale; a moment past nanoseconds' range is clipped to it; nulls stay null."""
    ints = pa.array([-5, 0, 300, None], pa.int64())
    assert as_stored(ints, "uint8").to_pylist() == [0, 0, 255, None]
    assert as_stored(pa.array([-(2.0**70), 1.5, 2.0**70, None]), "uint64").to_pylist() == \
        [0, 2, 2**64 - 2048, None]
    money = as_stored(pa.array([184.123, 0.1 + 0.2, 1e20, -1e20, None]), "decimal(6,2)")
    assert money.type == pa.decimal128(6, 2)
    assert money.to_pylist() == [decimal.Decimal("184.12"), decimal.Decimal("0.30"), decimal.Decimal("9999.99"),
                                 decimal.Decimal("-9999.99"), None]
    far = pa.array([0, 253402300799, None], pa.timestamp("s")).cast(pa.timestamp("us"))  # 9999-12-31 23:59:59
    nanos = as_stored(far, "timestamp(ns)")
    assert nanos.type == pa.timestamp("ns") and nanos[1].as_py() == pd.Timestamp.max.floor("s")
    assert as_stored(pa.array([1.0, 2.5], pa.float64()), "float32").type == pa.float32()
    assert as_stored(pa.array([5, None], pa.int64()), "float64").to_pylist() == [5.0, None]


def test_an_aware_moment_keeps_its_instant_and_reads_back_as_utc_wall_time():
    moments = pa.array([0, 1_600_000_000, None], pa.timestamp("s")).cast(pa.timestamp("us"))
    aware = as_stored(moments, "timestamp(us, America/New_York)")
    assert aware.type == pa.timestamp("us", tz="America/New_York")
    assert aware.cast(pa.int64()).to_pylist() == moments.cast(pa.int64()).to_pylist()
    own = pa.schema([pa.field("t", pa.timestamp("us"))])
    assert from_stored(pa.table({"t": aware}), own).column("t").to_pylist() == moments.to_pylist()


def test_a_stored_table_reads_back_in_the_pipeline_s_own_types():
    table = pa.table({"m": as_stored(pa.array([1.25, None]), "decimal(12,2)"),
                      "c": as_stored(pa.array([3, 4], pa.int64()), "uint8"),
                      "d": as_stored(pa.array([0, 19000], pa.date32()), "timestamp(us)")})
    own = pa.schema([pa.field("m", pa.float64()), pa.field("c", pa.int64()), pa.field("d", pa.date32())])
    back = from_stored(table, own)
    assert back.schema == own and back.column("m").to_pylist() == [1.25, None]
    assert back.column("d").to_pylist() == pa.array([0, 19000], pa.date32()).to_pylist()


@pytest.mark.parametrize(("entry", "message"), [
    ({"type": "integer", "bounds": [0, 9], "bins": [0, 9], "stored_as": "int128"}, "is not a storage type"),
    ({"type": "integer", "bounds": [0, 9], "bins": [0, 9], "stored_as": "decimal(40,2)"}, "is not a storage type"),
    ({"type": "integer", "bounds": [0, 9], "bins": [0, 9], "stored_as": "timestamp(us)"}, "cannot hold"),
    ({"type": "categorical", "categories": ["a"], "stored_as": "uint8"}, "cannot hold"),
    ({"type": "timestamp", "bounds": ["2020-01-01", "2021-01-01"], "bin_by": "month",
      "stored_as": "timestamp(us, Mars/Olympus)"}, "not a time zone"),
    ({"type": "float", "bounds": [0, 9], "bins": [0, 9], "format": "currency", "stored_as": "decimal(9,2)"},
     "one of format and stored_as")])
def test_a_bad_storage_type_is_refused_naming_what_was_expected(entry, message):
    with pytest.raises(SchemaError, match=message) as err:
        parse_schema({"name": "s", "columns": [{"name": "x", **entry}]})
    assert "column 'x'" in str(err.value)


def test_a_schema_that_says_no_storage_type_keeps_its_identity():
    entry = {"name": "x", "type": "integer", "bounds": [0, 9], "bins": [0, 9]}
    plain = parse_schema({"name": "s", "columns": [entry]})
    said = parse_schema({"name": "s", "columns": [{**entry, "stored_as": "uint8"}]})
    assert plain.content_hash() != said.content_hash()
    # the identity written before stored_as existed (release keys of stored releases stay valid)
    import hashlib
    import json
    old = plain.model_dump(mode="json")
    for c in old["columns"]:
        c.pop("stored_as")
        c.pop("place_shares")
    canonical = json.dumps(old, sort_keys=True, separators=(",", ":"))
    assert plain.content_hash() == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.fixture(scope="module")
def typed_release(tmp_path_factory):
    from conftest import PINNED_RUN_ID, pinned_ledger

    tmp = tmp_path_factory.mktemp("stored-types")
    rng = np.random.default_rng(3)
    n = 3000
    start = pd.Timestamp("2022-01-01", tz="UTC")
    table = pa.table({
        "amount": pa.array([decimal.Decimal(f"{x:.2f}") for x in rng.gamma(2.0, 60.0, n)], pa.decimal128(12, 2)),
        "grade": pa.array(rng.integers(0, 6, n).astype(np.uint8)),
        "delta": pa.array(rng.integers(-300, 300, n).astype(np.int16)),
        "ratio": pa.array(rng.normal(1.0, 0.2, n).astype(np.float32)),
        "paid_at": pa.array(start + pd.to_timedelta(rng.integers(0, 86400 * 300, n), unit="s"))
        .cast(pa.timestamp("us", tz="Europe/Paris")),
        "loaded_at": pa.array(start.tz_localize(None) + pd.to_timedelta(rng.integers(0, 86400 * 300, n), unit="s"))
        .cast(pa.timestamp("ns")),
        "tier": pa.array(rng.choice(["gold", "silver"], n)),
    })
    source = tmp / "payments.parquet"
    pq.write_table(table, source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privsynth.run.prepare.new_run_id", lambda: PINNED_RUN_ID)
        release = privsynth.synthesize(str(source), None, epsilon=2.0, unlimited=True, output=tmp / "run",
                                       ledger=pinned_ledger(tmp / "ledger.sqlite"), release_store=tmp / "store",
                                       seed=4)
    schema = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    return table, schema, release


def test_the_synthetic_table_has_the_source_s_storage_types(typed_release):
    source, schema, release = typed_release
    written = pq.read_table(release.run_dir / "synthetic.parquet")
    assert schema["amount"]["stored_as"] == "decimal(12,2)" and schema["grade"]["stored_as"] == "uint8"
    assert "stored_as" not in schema["tier"]
    for name in ("amount", "grade", "delta", "ratio", "loaded_at"):
        assert written.schema.field(name).type == source.schema.field(name).type, name
    # DuckDB declares an aware moment as TIMESTAMP WITH TIME ZONE, without its zone: the instant is kept, in UTC
    assert written.schema.field("paid_at").type == pa.timestamp("us", tz="UTC")
    assert release.to_arrow().schema == written.schema


def test_stored_values_are_in_the_column_s_form_and_range(typed_release):
    source, _, release = typed_release
    written = pq.read_table(release.run_dir / "synthetic.parquet").to_pandas()
    amounts = written["amount"].dropna()
    assert len(amounts) > 0.9 * len(written)
    assert all(a == a.quantize(decimal.Decimal("0.01")) for a in amounts)
    grades = written["grade"].dropna()
    assert grades.between(0, 255).all() and set(grades) <= set(range(6))
    paid = written["paid_at"].dropna()
    real = source.column("paid_at").to_pandas()
    assert paid.min() >= real.min().floor("D") - pd.Timedelta(days=31)
    assert paid.max() <= real.max().ceil("D") + pd.Timedelta(days=31)


def test_the_stages_read_a_stored_table_back(typed_release):
    """The schema's suite and the report read the synthetic table in the pipeline's own types: both ran."""
    _, _, release = typed_release
    validation = yaml.safe_load((release.run_dir / "synthetic-validation.json").read_text())
    assert validation["success"] is True
    assert (release.run_dir / "report.json").is_file()


def test_a_dbt_contract_names_the_storage_type():
    from privsynth.engine.dbt_export import dbt_schema

    schema = parse_schema({"name": "s", "columns": [
        {"name": "amount", "type": "float", "bounds": [0, 9], "bins": [0, 9], "stored_as": "decimal(12,2)"},
        {"name": "grade", "type": "integer", "bounds": [0, 9], "bins": [0, 9], "stored_as": "uint8"},
        {"name": "paid_at", "type": "timestamp", "bounds": ["2020-01-01", "2021-01-01"], "bin_by": "month",
         "stored_as": "timestamp(us, UTC)"},
        {"name": "count", "type": "integer", "bounds": [0, 9], "bins": [0, 9]}]})
    types = {c["name"]: c["data_type"] for c in dbt_schema(schema)["models"][0]["columns"]}
    assert types == {"amount": "numeric(12,2)", "grade": "smallint", "paid_at": "timestamp with time zone",
                     "count": "bigint"}


DOCUMENTED = {"name": "payments", "other_columns": "ignore", "columns": [
    {"name": "amount", "type": "float", "bounds": [0, 2000], "bins": [0, 50, 100, 200, 2000], "precision": 2,
     "on_out_of_domain": "clip"},
    {"name": "grade", "type": "integer", "bounds": [0, 6], "bins": [0, 1, 2, 3, 4, 5, 6]},
    {"name": "ratio", "type": "float", "bounds": [0, 3], "bins": [0, 1, 2, 3], "on_out_of_domain": "clip"},
    {"name": "paid_at", "type": "timestamp", "bounds": ["2022-01-01", "2023-01-01"], "bin_by": "quarter",
     "on_out_of_domain": "clip"},
    {"name": "tier", "type": "categorical", "categories": ["gold", "silver"]}]}


def test_a_documented_schema_s_run_keeps_the_source_s_storage_types(typed_release, tmp_path):
    """A schema written from documentation says nothing of storage: the run writes each column in the source's
    declared type (metadata), and ``sample`` draws more records in the same types."""
    from conftest import pinned_ledger

    source, _, _ = typed_release
    path = tmp_path / "payments.parquet"
    pq.write_table(source, path)
    release = privsynth.synthesize(str(path), parse_schema(DOCUMENTED), epsilon=1.0, unlimited=True, seed=1,
                                   output=tmp_path / "run", ledger=pinned_ledger(tmp_path / "ledger.sqlite"),
                                   release_store=tmp_path / "store")
    written = pq.read_table(release.run_dir / "synthetic.parquet").schema
    assert written.field("amount").type == pa.decimal128(12, 2) and written.field("grade").type == pa.uint8()
    assert written.field("ratio").type == pa.float32()
    assert written.field("paid_at").type == pa.timestamp("us", tz="UTC")
    more = release.sample(50, seed=3)
    assert str(more["grade"].dtype) == "uint8" and str(more["ratio"].dtype) == "float32"
    assert all(isinstance(v, decimal.Decimal) for v in more["amount"].dropna())


def test_a_pandas_frame_declares_no_storage_type(tmp_path):
    """A frame's dtypes follow its values: one missing value makes an int64 column float64 (rule 10: a type a reader
    inferred from the rows is not public). So a frame's run writes the pipeline's own types, with or without a
    schema, and a neighbour with one missing value more comes back in the same types."""
    import pandas as pd
    from conftest import pinned_ledger

    from privsynth.run.storage import declared_forms, declares_storage

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"count": rng.integers(0, 6, 2000), "ratio": rng.normal(1, 0.2, 2000).astype(np.float32)})
    neighbour = pd.concat([frame, pd.DataFrame({"count": [np.nan], "ratio": [np.nan]})], ignore_index=True)
    assert str(neighbour["count"].dtype) == "float64"  # the dtype moved with one record
    assert not declares_storage(frame) and declares_storage(pa.Table.from_pandas(frame))
    schema = parse_schema({"name": "s", "columns": [
        {"name": "count", "type": "integer", "bounds": [0, 6], "bins": [0, 2, 4, 6], "nullable": True},
        {"name": "ratio", "type": "float", "bounds": [0, 3], "bins": [0, 1, 2, 3], "on_out_of_domain": "clip",
         "nullable": True}]})
    assert declared_forms(schema, {"count": "float64", "ratio": "float32"}) == {"count": "float64", "ratio": "float32"}
    types = []
    for k, data in enumerate((frame, neighbour)):
        for given in (schema, None):
            release = privsynth.synthesize(data, given, epsilon=1.0, unlimited=True, seed=1,
                                           output=tmp_path / f"run{k}{given is None}",
                                           ledger=pinned_ledger(tmp_path / f"l{k}{given is None}.sqlite"),
                                           release_store=tmp_path / f"store{k}{given is None}")
            written = pq.read_table(release.run_dir / "synthetic.parquet").schema
            types.append((str(written.field("count").type), str(written.field("ratio").type)))
    assert types == [("int64", "double")] * 4
