"""Values in the forms a warehouse writes them, read the same way in every stage (docs/design.md 3 and 5.9).

A column of counts with "N/A" in one row of ten is a column of counts: the DP facts class a missing word as missing,
as binning and validation read it, so the facts' type decision and every later read agree. A column the rows hold no
value of (a retired column, "nan" in every row) comes back with no value: the release's measurements show none, so
the rounding stage writes none (``report.evidence.unsupported_values``). A typed timestamp column's grain is one of its
DP facts: dates a warehouse stores as timestamps come back at midnight. Moments a typed source stores as text come
back as it writes them: with a space as SQL writes a moment, or with a zone offset (written in UTC, +00:00).
"""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SeededDraws, exact_facts

import privsynth
from privsynth.discovery import facts as F
from privsynth.engine.values import MISSING_WORDS
from privsynth.mechanisms.base import Measurement
from privsynth.report.evidence import unsupported_values
from privsynth.schema import parse_schema
from privsynth.schema.encoding import domain_of


def test_missing_words_are_the_missing_class_of_a_column_s_facts():
    """Each missing word, "nan" in any case and "-nan" among them, is in the missing class (and in no slot of the
    places histogram); a number, a word that is no missing word and "NA " (cleaned: blanks around a value are not
    part of it) are read as before."""
    words = [*MISSING_WORDS, "NAN", "nAn"]
    frame = pd.DataFrame({"v": [*words, "12", "3.5", "purple", " NA "]})
    exact = exact_facts(frame, [("v", "text")])["v"]
    classes = dict(zip(F.CLASSES, exact.classes))
    assert classes["missing"] == len(words) + 1  # " NA " too
    assert (classes["whole"], classes["fraction"], classes["text"]) == (1, 1, 1)
    assert exact.decimals.sum() == 2  # the two numbers' places only: "nan" has none


def test_a_column_of_counts_with_missing_words_is_decided_a_column_of_counts():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 60, 5000).astype(str).astype(object)
    values[rng.random(5000) < 0.1] = "N/A"
    values[rng.random(5000) < 0.02] = "NULL"
    exact = exact_facts(pd.DataFrame({"v": values}), [("v", "text")])["v"]
    decided = F.decide(F.release("v", exact, 0.01, SeededDraws(1)), "text")
    assert decided.kind == "integer"
    assert decided.missing_share == pytest.approx(np.isin(values, ["N/A", "NULL"]).mean(), abs=0.02)


def test_binning_and_validation_read_a_missing_word_as_missing_not_as_a_fault():
    from privsynth.engine.backends import open_table
    from privsynth.engine.binning import read_column

    schema = parse_schema({"name": "t", "columns": [
        {"name": "n", "type": "integer", "bounds": [0, 9], "bins": [0, 5, 9], "nullable": True},
        {"name": "d", "type": "date", "bounds": ["2020-01-01", "2020-12-31"], "bin_by": "month", "nullable": True}]})
    frame = pd.DataFrame({"n": ["1", "N/A", "nan", "-nan", "#N/A", "seven"],
                          "d": ["2020-02-03", "NULL", "None", "n/a", "<NA>", "someday"]})
    opened = open_table(frame, None)
    try:
        for name in ("n", "d"):
            read = read_column(opened.table, schema.column(name), text_from_csv=False)
            out = opened.table.select(missing=read.missing, fault=read.not_a_number).to_pandas()
            assert out["missing"].tolist() == [False, True, True, True, True, False], name
            assert out["fault"].tolist() == [False] * 5 + [True], name
    finally:
        opened.close()


@pytest.mark.parametrize(("text", "cls"), [
    ("2021-05-07 03:05:20", "iso_space"), ("2021-05-07 03:05", "iso_space"), ("2021-05-07T03:05:20", "timestamp"),
    ("2021-05-07T03:05:20Z", "timestamp"), ("2021-05-07T03:05:20-04:00", "iso_offset"),
    ("2021-05-07T03:05:20+0530", "iso_offset"), ("2021-05-07 03:05:20-04", "iso_space_offset"),
    ("2021-05-07 03:05:20.250+01:00", "iso_space_offset"), ("2021-05-07", "date"), ("2021-05-07 25:00:00", "text"),
])
def test_an_iso_moment_s_class_is_its_written_form(text, cls):
    exact = exact_facts(pd.DataFrame({"v": [text]}), [("v", "text")])["v"]
    assert F.CLASSES[int(np.argmax(exact.classes))] == cls and exact.classes.sum() == 1


@pytest.mark.parametrize(("counts", "form"), [
    ({"iso_space": 900, "timestamp": 100}, "%Y-%m-%d %H:%M:%S"), ({"timestamp": 900, "iso_space": 100}, None),
    ({"iso_offset": 1000}, "%Y-%m-%dT%H:%M:%S+00:00"), ({"iso_space_offset": 1000}, "%Y-%m-%d %H:%M:%S+00:00"),
])
def test_an_iso_moment_s_form_is_decided_from_noisy_counts(counts, form):
    from privsynth.discovery.forms import date_format

    classes = [float(counts.get(c, 0)) for c in F.CLASSES]
    facts = F.NoisyFacts("t", tuple(classes), 500.0, 10.0, 10.0, (sum(counts.values()), *(0.0,) * (F.PLACES - 1)), 10.0)
    assert date_format(facts) == form


SCHEMA = parse_schema({"name": "t", "columns": [
    {"name": "retired", "type": "integer", "bounds": [0, 10], "bins": [0, 5, 10], "nullable": True},
    {"name": "state", "type": "categorical", "categories": ["CA", "MA"], "on_out_of_domain": "category"},
]})


def test_a_column_whose_values_show_no_evidence_is_written_missing():
    """Value levels 0 and 1 with noisy counts 30 and -12 at sigma 20 (together 18 against a bar of 2 x 20 x sqrt 2)
    show no evidence: both are unsupported; 60 and 0 (60 > 56.6) are kept. A column with no structural level keeps
    its values whatever they read; a 2-way measurement joins the evidence (its projection sums 3 cells a level)."""
    domain = domain_of(SCHEMA)  # retired: 2 bins, <missing>; state: CA, MA, <out-of-domain>
    structural = {0: (2,), 1: (2,)}
    empty = Measurement((0,), np.array([30.0, -12.0, 2000.0]), "gaussian", 20.0)
    state = Measurement((1,), np.array([1000.0, 1000.0, 5.0]), "gaussian", 20.0)
    assert unsupported_values(structural, (empty, state), domain) == {0: (0, 1)}
    held = Measurement((0,), np.array([60.0, 0.0, 2000.0]), "gaussian", 20.0)
    assert unsupported_values(structural, (held, state), domain) == {}
    assert unsupported_values({0: (), 1: (2,)}, (empty, state), domain) == {}
    pair = Measurement((0, 1), np.array([10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 980.0, 980.0, 5.0]), "gaussian", 20.0)
    # combined: 1/var = 1/400 + 1/(3 * 400) per level; the values' sum (30 - 12) + (30 + 30) = 58 / 2 weighed
    sd = (1 / 400 + 1 / 1200) ** -0.5
    counts = ((30.0 / 400 + 30.0 / 1200) * sd ** 2, (-12.0 / 400 + 30.0 / 1200) * sd ** 2)
    assert sum(counts) < 2 * sd * np.sqrt(2)  # 25.5 < 49.0: still no evidence with the pair
    assert unsupported_values(structural, (empty, pair, state), domain) == {0: (0, 1)}


@pytest.fixture(scope="module")
def warehouse_release(tmp_path_factory):
    from conftest import PINNED_RUN_ID, pinned_ledger

    tmp = tmp_path_factory.mktemp("missing-forms")
    rng = np.random.default_rng(5)
    n = 4000
    visits = rng.integers(0, 40, n).astype(str).astype(object)
    visits[rng.random(n) < 0.1] = "N/A"
    frame = pd.DataFrame({
        "visits": visits,                                                               # counts with "N/A"
        "opened": pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D"),  # midnights
        "retired": pd.array([None] * n, dtype="Int64"),                                 # no value in any row
        "legacy": ["nan"] * n,                                                          # "nan" in every row
        "tier": rng.choice(["gold", "silver", "bronze"], n, p=[0.2, 0.3, 0.5]),
    })
    huge = np.array([2**64 - 2**11 * k for k in range(1, 40)], dtype=np.uint64)  # uint64 codes past int64's range
    frame["batch"] = rng.choice(huge, n)
    frame["serial"] = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2)  # spread over uint64's range
    opened = frame["opened"].dt.date
    frame["valid_to"] = [datetime.date(9999, 12, 31) if open_row else day + datetime.timedelta(days=30)
                         for open_row, day in zip(rng.random(n) < 0.7, opened)]   # a history table's open rows
    moments = pd.Timestamp("2021-03-01", tz="UTC") + pd.to_timedelta(rng.integers(0, 10**7, n), unit="s")
    frame["logged"] = moments.strftime("%Y-%m-%d %H:%M:%S")                          # as SQL writes a moment
    frame["seen"] = moments.tz_convert("US/Eastern").astype(str)                    # with its zone's offset
    source = tmp / "accounts.parquet"
    frame.to_parquet(source, index=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privsynth.run.prepare.new_run_id", lambda: PINNED_RUN_ID)
        release = privsynth.synthesize(str(source), None, epsilon=2.0, unlimited=True, output=tmp / "run",
                                       ledger=pinned_ledger(tmp / "ledger.sqlite"), release_store=tmp / "store",
                                       seed=2)
    run = release.run_dir
    schema = {c["name"]: c for c in yaml.safe_load((run / "schema.yaml").read_text())["columns"]}
    validation = yaml.safe_load((run / "synthetic-validation.json").read_text())
    return frame, schema, pd.read_parquet(run / "synthetic.parquet"), validation


def test_counts_with_missing_words_come_back_as_counts(warehouse_release):
    _, schema, synthetic, _ = warehouse_release
    assert schema["visits"]["type"] == "integer"
    present = synthetic["visits"].dropna()
    assert len(present) > 0.8 * len(synthetic) and present.map(lambda v: str(v).isdigit()).all()
    assert 0.04 < synthetic["visits"].isna().mean() < 0.16


def test_dates_stored_as_timestamps_come_back_at_midnight(warehouse_release):
    _, schema, synthetic, _ = warehouse_release
    assert schema["opened"]["type"] == "timestamp" and schema["opened"]["resolution"] == "day"
    moments = pd.to_datetime(synthetic["opened"].dropna())
    assert len(moments) > 0.9 * len(synthetic) and (moments == moments.dt.normalize()).all()


def test_a_column_with_no_value_comes_back_with_no_value(warehouse_release):
    """The retired column holds no value and comes back with none; "nan" in every row is missing in every row (or
    the text "nan" itself, as the table holds it), never a number; the synthetic table passes its own suite."""
    _, _, synthetic, validation = warehouse_release
    assert synthetic["retired"].isna().all()
    legacy = synthetic["legacy"].dropna().astype(str)
    assert (legacy == "nan").all()
    assert validation["success"] is True


def test_moments_stored_as_text_come_back_written_as_the_table_writes_them(warehouse_release):
    """A space between date and time stays a space; an offset stays an offset, the moment written in UTC (the same
    instant: the offset a row had is not among the release's facts)."""
    frame, schema, synthetic, _ = warehouse_release
    assert schema["logged"]["format"] == "%Y-%m-%d %H:%M:%S"
    assert schema["seen"]["format"] == "%Y-%m-%d %H:%M:%S+00:00"
    logged, seen = synthetic["logged"].dropna(), synthetic["seen"].dropna()
    assert len(logged) > 0.9 * len(synthetic) and logged.str.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d").all()
    assert len(seen) > 0.9 * len(synthetic) and seen.str.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00").all()
    instants = pd.to_datetime(seen, utc=True)
    real = pd.to_datetime(frame["seen"], utc=True)
    assert instants.min() >= real.min().floor("D") and instants.max() <= real.max().ceil("D") + pd.Timedelta(days=31)


def test_whole_draws_are_total_for_any_bounds():
    from privsynth.schema.sampling import INT64_DOUBLES, whole_draws

    rng = np.random.default_rng(0)
    small = whole_draws(np.array([0.0, 10.0, 5.0]), np.array([3.0, 10.0, 4.0]), rng)  # an empty bin: its low end
    assert small.dtype == np.int64 and 0 <= small[0] <= 3 and small[1] == 10 and small[2] == 5
    huge = whole_draws(np.array([2.0**62, 2.0**63, -(2.0**70)]), np.array([2.0**64, 2.0**64, -(2.0**64)]), rng)
    assert huge.dtype == np.int64 and huge[0] >= 2**62 and huge[1] == int(INT64_DOUBLES[1])
    assert huge[2] == -(2**63)


def test_uint64_columns_beyond_int64_end_the_run_written_as_int64_can_hold_them(warehouse_release):
    """A uint64 source column's DP bounds reach 2^64; the decoder drew int64 from them and the run failed after its
    charge (rule 9). Its values are written as int64 holds them: those beyond 2^63 - 1 at int64's top."""
    _, schema, synthetic, _ = warehouse_release
    for name in ("batch", "serial"):
        if schema[name].get("drop"):
            continue
        values = synthetic[name].dropna()
        assert len(values) > 0.9 * len(synthetic) and (values >= 0).all(), name


def test_the_calendar_s_last_day_is_written_exactly(warehouse_release):
    """History tables close their open rows at 9999-12-31. Round 1's calendar grid ended at 3000, so that date was
    clipped to 3000-01-01 (70% of the rows, each a date the column never holds); the grid now reaches the
    calendar's ends, and the date is a public candidate point, written exactly."""
    frame, schema, synthetic, _ = warehouse_release
    assert schema["valid_to"]["bounds"][1] == "9999-12-31"
    real = (frame["valid_to"] == datetime.date(9999, 12, 31)).mean()
    written = synthetic["valid_to"].dropna()
    assert abs((written == datetime.date(9999, 12, 31)).mean() - real) < 0.05
    assert (written <= datetime.date(9999, 12, 31)).all()


def test_temporal_candidates_and_the_calendar_s_ends():
    from privsynth.discovery import points as P
    from privsynth.discovery.bounds import year_edges
    from privsynth.schema import temporal

    last_day = temporal.to_unit_last("date")
    assert year_edges("date")[0] == float((datetime.date(1, 1, 1) - datetime.date(1970, 1, 1)).days)
    assert year_edges("date")[-1] == last_day and year_edges("timestamp")[-1] == temporal.to_unit_last("timestamp")
    assert P.temporal_candidates(0.0, last_day, "date") == (0.0, float((datetime.date(9999, 1, 1) -
                                                                         datetime.date(1970, 1, 1)).days), last_day)
    assert len(P.temporal_candidates(-1e11, 1e12, "timestamp")) == 6
    assert P.with_points((0.0, 10.0, last_day), (last_day,), True) == (0.0, 10.0, last_day - 1.0, last_day)
    assert temporal.format_unit(last_day + 1.0, "date") == "9999-12-31+"


def test_nanosecond_timestamps_are_read(tmp_path):
    """pandas writes its timestamps to Parquet in nanoseconds. The calendar test compared such a column with the
    calendar's ends, which are no nanosecond timestamps: every run on such a file failed after discovery's
    charge (docs/design.md 5.9). Both a naive and a UTC column now run to the end, inside their real range."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    moments = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**8, 1500), unit="s")
    frame = pd.DataFrame({"naive": moments.astype("datetime64[ns]"),
                          "aware": moments.tz_localize("UTC").astype("datetime64[ns, UTC]"),
                          "k": rng.integers(0, 3, 1500)})
    source = tmp_path / "events.parquet"
    frame.to_parquet(source, index=False)
    assert pq.read_schema(source).field("naive").type.unit == "ns"
    from conftest import pinned_ledger

    release = privsynth.synthesize(str(source), None, epsilon=1.0, unlimited=True, output=tmp_path / "run",
                                   ledger=pinned_ledger(tmp_path / "ledger.sqlite"), release_store=tmp_path / "store",
                                   seed=3)
    synthetic = pd.read_parquet(release.run_dir / "synthetic.parquet")
    for name in ("naive", "aware"):
        written = pd.to_datetime(synthetic[name].dropna(), utc=True)
        real = pd.to_datetime(frame[name], utc=True)
        assert len(written) > 0.9 * len(synthetic), name
        # inside the calendar cells the DP bounds are made of (years), never an epoch's or a type's end
        year = pd.Timedelta(days=366)
        assert written.min() >= real.min() - year and written.max() <= real.max() + year, name


def test_a_coded_column_of_one_huge_value_has_a_bin():
    """A column holding 1e300 alone was found to be a coded column whose last bin [1e300, 1e300 + 1] is empty in
    doubles: the discovered schema failed to parse after discovery's charge (docs/design.md 5.9)."""
    col = parse_schema({"name": "t", "columns": [{"name": "x", "type": "integer", "values": [1e300]}]}).column("x")
    assert col.bounds[0] == 1e300 < col.bounds[1]
