"""SQL table in, SQL table out against a real PostgreSQL server: the whole run through the flow,
counting on the server (only count tables reach the client) and writing the synthetic table back."""

from __future__ import annotations

import pyarrow as pa
import yaml
from conftest import TOY_SCHEMA, toy_frame
from postgres_fixture import postgres_url  # noqa: F401  (a fixture)


def test_postgres_table_in_postgres_table_out_through_the_flow(harness, postgres_url, tmp_path):  # noqa: F811
    from flows.synthesize import synthesize
    from privsynth.engine import connect_url
    from privsynth.run.parameters import RunParameters

    frame = toy_frame(400)
    con = connect_url(postgres_url)
    try:
        con.create_table("people", pa.Table.from_pandas(frame, preserve_index=False), overwrite=True)
    finally:
        con.disconnect()
    schema = tmp_path / "toy.yaml"
    schema.write_text(yaml.safe_dump(TOY_SCHEMA))
    parameters = RunParameters(input=f"{postgres_url}?table=people", sink=f"{postgres_url}?table=people_synthetic",
                               schema_file=str(schema), mechanism="reduced_space", rows=120, unlimited=True,
                               mechanism_options={"points_per_statistic": 2.0}, output=str(tmp_path / "run"),
                               ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    result = synthesize(parameters, release_store=str(tmp_path / "releases"))
    assert result["rows"] == 120 and "people_synthetic" in result["sink"]
    con = connect_url(postgres_url)
    try:
        back = con.table("people_synthetic")
        assert dict(back.schema().items()).keys() == {"colour", "size", "weight", "member"}
        assert str(back.schema()["size"]) == "int64" and str(back.schema()["member"]) == "boolean"
        assert back.count().execute() == 120
    finally:
        con.disconnect()
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert "synthetic.parquet" in names and not names & {"raw.parquet", "bits.parquet", "histogram.parquet"}


def test_storage_types_are_written_to_postgres_in_the_types_it_has(postgres_url):  # noqa: F811
    """The release keeps the source's storage types (``stored_as``); PostgreSQL has no unsigned integers and no
    nanoseconds, so those are written in the signed type that holds them and in microseconds: the table is written
    (before, a UTINYINT column failed the write after the charge) and every value reads back."""
    import decimal

    from privsynth.engine import connect_url
    from privsynth.io import write_sink
    from privsynth.schema.stored import as_stored

    moments = pa.array([0, 1_600_000_000, None], pa.timestamp("s")).cast(pa.timestamp("us"))
    table = pa.table({
        "grade": as_stored(pa.array([0, 255, None], pa.int64()), "uint8"),
        "serial": as_stored(pa.array([0.0, 2.0**64, None]), "uint64"),
        "amount": as_stored(pa.array([1.25, 9999.999, None]), "decimal(12,2)"),
        "paid_at": as_stored(moments, "timestamp(us, UTC)"),
        "loaded_at": as_stored(moments, "timestamp(ns)"),
        "ratio": as_stored(pa.array([0.5, 1.5, None]), "float32"),
    })
    write_sink(table, f"{postgres_url}?table=stored_types")
    con = connect_url(postgres_url)
    try:
        back = con.table("stored_types")
        types = {k: str(v) for k, v in back.schema().items()}
        rows = back.order_by("ratio").execute()
        serial_text = con.raw_sql("SELECT serial::text FROM stored_types WHERE serial IS NOT NULL "
                                  "ORDER BY serial").fetchall()
    finally:
        con.disconnect()
    assert types["grade"] == "int16" and types["amount"] == "decimal(12, 2)" and types["ratio"] == "float32"
    assert types["serial"].startswith("decimal(20") and types["paid_at"].startswith("timestamp('UTC'")
    assert rows["grade"].tolist()[:2] == [0, 255] and [v for (v,) in serial_text] == ["0", str(2**64 - 2048)]
    assert rows["amount"].tolist()[:2] == [decimal.Decimal("1.25"), decimal.Decimal("10000.00")]
