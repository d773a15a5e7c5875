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
