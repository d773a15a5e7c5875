"""Issue 35: every everyday format comes back in its real form (docs/design.md 3), decided under DP.

A generated warehouse table (no real rows), one column per format family, runs WITHOUT a schema; each
synthetic value must be in its column's real form, scored strictly: a zip code is one of the table's codes
with its leading zero, an amount is written "1,234.50", a date 03/14/2021, a category "MA " as the table
holds it. The DP facts decide each form (a noisy class histogram), so the unit tests of ``decide`` check
the decisions and this test checks the whole round trip: source -> discovery -> binning -> rounding.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SeededDraws

import privsynth
from privsynth.discovery import facts as F
from privsynth.discovery.forms import NUMBER_FORMAT_CLASSES, moment_resolution, written_precision
from privsynth.discovery.row_reads import decimals_bin, read_text
from privsynth.engine.values import DATE_FORMATS, NUMBER_FORMATS

N = 6000


def dirty_table(n: int = N, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    state = rng.choice(["MA ", "NY", "CA", "TX"], n, p=[0.3, 0.3, 0.25, 0.15])
    zips = np.where(state == "MA ", rng.choice(["02134", "02138", "01002"], n), rng.choice(["10001", "94105"], n))
    amount = np.round(rng.lognormal(7.5, 0.8, n), 2)
    days = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 600, n), unit="D")
    return pd.DataFrame({
        "state": state, "zip": zips,
        "amount": [f"{a:,.2f}" for a in amount],                     # thousands separators, cents
        "price": [f"${a:,.2f}" for a in amount / 10],                # a dollar sign
        "share": [f"{p:.0f}%" for p in rng.uniform(0, 100, n)],     # a percent sign
        "visit": days.strftime("%m/%d/%Y"),                          # month first
        "booked": days.strftime("%d.%m.%Y"),                         # dotted, day first
        "filed": days.strftime("%Y/%m/%d"),                          # year first, slashes
        "reported": (days + pd.to_timedelta(rng.integers(0, 86_400, n), unit="s")).strftime("%Y/%m/%d %H:%M:%S"),
        "read_at": (days + pd.to_timedelta(rng.integers(0, 24, n), unit="h")).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "score": [f"{s:.1f}" for s in rng.normal(70, 8, n)],         # one decimal
        "code": rng.choice(["1.0", "2.0", "3.0"], n),                # integer codes written as floats
        "bearing": (10 * rng.integers(0, 37, n)).astype(str),       # whole tens: wind directions
        "flag": rng.choice(["Y", "N"], n),
    })


@pytest.fixture(scope="module")
def dirty_release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("formats")
    source = tmp / "dirty.csv"
    frame = dirty_table()
    frame.to_csv(source, index=False)
    # the forms are decided and written whatever the mechanism: a fast one (the default's figures: benchmarks/)
    # one known draw (a pinned ledger secret, run id and seed): the checks meet the same noise every test run
    from conftest import PINNED_RUN_ID, pinned_ledger

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privsynth.run.prepare.new_run_id", lambda: PINNED_RUN_ID)
        release = privsynth.synthesize(str(source), None, epsilon=4.0, unlimited=True, output=tmp / "run",
                                       ledger=pinned_ledger(tmp / "ledger.sqlite"), release_store=tmp / "store",
                                       mechanism="reduced_space", rows=3000, seed=4)
    run = release.run_dir
    schema = {c["name"]: c for c in yaml.safe_load((run / "schema.yaml").read_text())["columns"]}
    return frame, schema, pd.read_parquet(run / "synthetic.parquet")


def _present(series: pd.Series) -> list[str]:
    values = series.dropna().astype(str)
    return [v for v in values if v != "<out-of-domain>"]


def test_codes_with_leading_zeros_stay_text_codes(dirty_release):
    frame, schema, synthetic = dirty_release
    assert schema["zip"]["type"] == "categorical"
    assert (set(_present(synthetic["zip"])) <= set(frame["zip"])
            and len(_present(synthetic["zip"])) > 0.9 * len(synthetic))


def test_numbers_a_typed_source_stores_as_strings_come_back_as_strings(tmp_path):
    """A Parquet table whose zip codes are strings without a leading zero ("98117"): they read as numbers (a coded
    integer column), and come back as the strings the table holds, not as integers; a typed number stays a number.
    ISO dates and moments stored as strings come back as ISO text too, the moments with their Z. From a CSV, which
    has no types, numbers are numbers."""
    rng = np.random.default_rng(2)
    n = 4000
    days = pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 300, n), unit="D")
    frame = pd.DataFrame({"zip": rng.choice(["98117", "98103", "98115", "98125"], n),
                          "amount": np.round(rng.lognormal(3.0, 0.5, n), 2),
                          "day": days.strftime("%Y-%m-%d"),
                          "read_at": (days + pd.to_timedelta(rng.integers(0, 24, n), unit="h")).strftime(
                              "%Y-%m-%dT%H:%M:%SZ")})
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    release = privsynth.synthesize(str(tmp_path / "t.parquet"), None, epsilon=4.0, unlimited=True,
                                   output=tmp_path / "run", ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
                                   release_store=tmp_path / "store", mechanism="reduced_space", rows=2000, seed=1)
    schema = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    assert schema["zip"]["type"] == "integer" and schema["zip"]["format"] == "plain"
    synthetic = pd.read_parquet(release.run_dir / "synthetic.parquet")
    zips = synthetic["zip"].dropna()
    assert len(zips) > 0.9 * len(synthetic) and all(isinstance(z, str) for z in zips) and set(zips) <= set(frame.zip)
    assert "format" not in schema["amount"] and synthetic["amount"].dtype.kind == "f"
    for column, kind, form in (("day", "date", "%Y-%m-%d"), ("read_at", "timestamp", "%Y-%m-%dT%H:%M:%SZ")):
        assert schema[column]["type"] == kind and schema[column]["format"] == form
        values = synthetic[column].dropna()
        assert len(values) > 0.9 * len(synthetic) and all(isinstance(v, str) for v in values)
        assert pd.to_datetime(values, format=form, errors="coerce").notna().all()
    assert schema["read_at"]["resolution"] == "hour"


def test_a_category_is_written_back_as_the_table_holds_it(dirty_release):
    frame, schema, synthetic = dirty_release
    assert "MA " in schema["state"]["categories"]
    written = _present(synthetic["state"])
    assert set(written) <= set(frame["state"]) and "MA " in written
    assert abs(written.count("MA ") / len(written) - 0.3) < 0.05  # not lost to <out-of-domain>


@pytest.mark.parametrize(("column", "form"), [("amount", "thousands"), ("price", "currency"), ("share", "percent")])
def test_formatted_numbers_are_numbers_written_in_their_format(dirty_release, column, form):
    _, schema, synthetic = dirty_release
    assert schema[column]["format"] == form and schema[column]["type"] in ("integer", "float")
    values = _present(synthetic[column])
    assert values and all(re.match(NUMBER_FORMATS[form], v) or re.match(r"^-?\$?[0-9]{1,3}(\.[0-9]+)?%?$", v)
                          for v in values), values[:5]
    if form != "percent":  # cents: two decimals, as the table writes them
        assert all(re.search(r"\.[0-9]{2}$", v) for v in values)


@pytest.mark.parametrize(("column", "kind", "form"), [("visit", "date", "%m/%d/%Y"), ("booked", "date", "%d.%m.%Y"),
                                                      ("filed", "date", "%Y/%m/%d"),
                                                      ("reported", "timestamp", "%Y/%m/%d %H:%M:%S")])
def test_dates_are_dates_written_in_the_table_s_format(dirty_release, column, kind, form):
    frame, schema, synthetic = dirty_release
    assert schema[column]["type"] == kind and schema[column]["format"] == form
    values = _present(synthetic[column])
    parsed = pd.to_datetime(pd.Series(values), format=form, errors="coerce")
    assert values and parsed.notna().all()
    low, high = (pd.Timestamp(b) for b in schema[column]["bounds"])  # inside the column's (DP) domain
    assert parsed.min() >= low and parsed.max() <= high


def test_moments_keep_their_grain(dirty_release):
    """Hourly readings come back on the hour (the grain decided under DP from the facts' grain slots); moments
    written to the second keep no grain."""
    _, schema, synthetic = dirty_release
    assert schema["read_at"]["type"] == "timestamp" and schema["read_at"]["resolution"] == "hour"
    moments = pd.to_datetime(synthetic["read_at"].dropna())
    assert len(moments) > 0.9 * len(synthetic) and (moments.dt.minute == 0).all() and (moments.dt.second == 0).all()
    assert "resolution" not in schema["reported"]


@pytest.mark.parametrize(("slots", "grain"), [
    ((1000, 0, 0, 0), "day"), ((400, 600, 0, 0), "hour"), ((10, 50, 940, 0), "minute"), ((0, 0, 10, 990), None),
    ((0, 0, 0, 0), None), ((900, 0, 0, 100), None),
])
def test_the_grain_is_decided_from_noisy_counts(slots, grain):
    facts = F.NoisyFacts("t", tuple(0.0 for _ in F.CLASSES), 50.0, 1.0, 1.0,
                         (*map(float, slots), *(0.0,) * (F.PLACES - len(slots))), 1.0)
    assert moment_resolution(facts) == grain


@pytest.mark.parametrize("rows", [3_000, 8_000, 19_302])
def test_moments_at_midnight_keep_the_day_grain_at_a_wide_table_s_noise(rows):
    """Dates stored as timestamps (every moment at midnight) at a 28-column table's facts rho: a finer grain needed
    the finer slots within a twentieth of the column with one deviation of their noise added, so 8,000 such moments
    got an hour grain, a minute grain or whole seconds in 55% of draws (3,000: 78%), every value then at a time of
    day the column never holds. A coarser grain never writes a moment outside the column's form (a midnight is a
    whole hour and minute too): the finer grain needs the finer slots beyond one deviation now."""
    classes = np.zeros(len(F.CLASSES))
    classes[F.CLASSES.index("timestamp")] = rows
    slots = np.zeros(F.PLACES)
    slots[0] = rows
    exact = F.ExactFacts(classes, 500.0, slots)
    grains = [moment_resolution(F.release("t", exact, 3.7e-5, SeededDraws(s))) for s in range(400)]
    assert grains.count("day") >= (0.9 if rows < 5_000 else 0.97) * len(grains)
    hourly = slots.copy()
    hourly[:2] = 0.8 * rows, 0.2 * rows  # a fifth of the moments on the hour: hour, or day (never a finer grain)
    grains = [moment_resolution(F.release("t", F.ExactFacts(classes, 500.0, hourly), 3.7e-5, SeededDraws(s)))
              for s in range(400)]
    assert grains.count("hour") + grains.count("day") >= 0.9 * len(grains)
    if rows > 10_000:
        assert grains.count("hour") == len(grains)


def test_a_typed_moment_s_grain_is_read_totally():
    import ibis

    from privsynth.engine.values import moment_grain

    moments = pd.to_datetime(["2020-01-01 00:00", "2020-01-01 05:00", "2020-01-01 05:30", "2020-01-01 05:30:07",
                              "1960-03-01 05:00", None], format="ISO8601")
    table = ibis.memtable(pd.DataFrame({"v": moments}))
    out = table.select(g=moment_grain(table.v)).to_pandas()["g"]
    assert out[:5].tolist() == [0, 1, 2, 3, 1] and pd.isna(out[5])


def test_whole_tens_come_back_as_whole_tens(dirty_release):
    """Wind directions written in whole tens: their place (precision -1) is decided under DP, so every synthetic
    value is one of the tens the column holds, never a 231 drawn inside a bin."""
    _, schema, synthetic = dirty_release
    assert schema["bearing"]["type"] == "integer" and schema["bearing"]["precision"] == -1
    bearing = synthetic["bearing"].dropna().astype(int)
    assert len(bearing) > 0.9 * len(synthetic) and set(bearing) <= set(range(0, 361, 10))


def test_decimals_flags_and_float_codes_keep_their_form(dirty_release):
    frame, schema, synthetic = dirty_release
    assert schema["score"]["type"] == "float" and schema["score"]["precision"] == 1
    assert all(re.fullmatch(r"-?[0-9]+\.[0-9]", f"{v:.10g}" if v % 1 else f"{v:.1f}")
               for v in synthetic["score"].dropna())
    assert set(_present(synthetic["flag"])) <= {"Y", "N"}
    assert schema["code"]["type"] == "integer"
    assert set(synthetic["code"].dropna().astype(int)) <= {1, 2, 3}


# ---------------------------------------------------------------- the decisions, from noisy counts

def _facts(**counts) -> F.NoisyFacts:
    classes = tuple(float(counts.get(c, 0)) for c in F.CLASSES)
    decimals = tuple(float(x) for x in counts.get("decimals", (0,) * F.PLACES))
    return F.NoisyFacts("c", classes, float(counts.get("distinct", 50)), 1.0, 1.0, decimals, 1.0)


@pytest.mark.parametrize(("counts", "kind", "form", "precision"), [
    ({"whole": 300, "thousands": 700, "decimals": (0, 0, 0, 0, 0, 1000, 0, 0, 0, 0)}, "float", "thousands", 2),
    ({"currency": 1000, "decimals": (0, 0, 0, 1000, 0, 0, 0, 0, 0, 0)}, "integer", "currency", None),
    ({"percent": 990, "text": 10, "decimals": (0, 0, 0, 990, 0, 0, 0, 0, 0, 0)}, "integer", "percent", None),
    ({"month_first": 400, "slash": 600}, "date", "%m/%d/%Y", None),
    ({"day_first": 400, "slash": 600}, "date", "%d/%m/%Y", None),
    ({"dot": 1000}, "date", "%d.%m.%Y", None),
    ({"year_first": 1000}, "date", "%Y/%m/%d", None),
    ({"year_first_time": 990, "text": 10}, "timestamp", "%Y/%m/%d %H:%M:%S", None),
    ({"timestamp": 600, "date": 400}, "timestamp", None, None),
    ({"date": 1000}, "date", None, None),
    ({"fraction": 1000, "decimals": (0, 0, 0, 0, 1000, 0, 0, 0, 0, 0)}, "float", None, 1),
    ({"fraction": 1000, "decimals": (0, 0, 0, 0, 100, 100, 100, 100, 600, 0)}, "float", None, None),
    ({"fraction": 1000, "decimals": (0, 0, 0, 4000, 2, 0, 1, 0, 0, 0)}, "float", None, 1),  # halves under the noise
    ({"fraction": 1000, "decimals": (0, 0, 0, 2, 0, 1, 0, 0, 0, 0)}, "float", None, 1),  # the class counts show them
    ({"fraction": 300, "decimals": (0, 0, 0, 0, 0, 300, 0, 0, 0, 700)}, "float", None, 2),  # rainfall: 70% zeros
    ({"text": 1000, "distinct": 5}, "categorical", None, None),  # codes with leading zeros read as text
])
def test_the_written_form_is_decided_from_noisy_counts(counts, kind, form, precision):
    decided = F.decide(_facts(**counts), "text")
    assert (decided.kind, decided.value_format, decided.precision) == (kind, form, precision)


def test_every_date_format_reads_only_valid_dates():
    import ibis

    from privsynth.engine.values import clean_text, moment_from_text

    texts = ["02/29/2020", "02/29/2021", "13/01/2021", "31.04.2021", "29.02.2024", "1/2/2021", "2021-02-30",
             "2020/02/29", "2021/02/29", "2020/6/4", "2020/06/04 20:45:34", "2020/06/04 20:45", "2020/06/04 24:00:00"]
    table = ibis.memtable(pd.DataFrame({"v": texts}))
    out = table.select(**{f: moment_from_text(clean_text(table.v), f) for f in DATE_FORMATS}).to_pandas()
    assert out["%m/%d/%Y"].notna().tolist() == [True, False, False, False, False, True] + [False] * 7
    assert out["%d/%m/%Y"].notna().tolist() == [False, False, True, False, False, True] + [False] * 7
    assert out["%d.%m.%Y"].notna().tolist() == [False, False, False, False, True] + [False] * 8
    assert out["%Y/%m/%d"].notna().tolist() == [False] * 7 + [True, False, True, False, False, False]
    assert out["%Y/%m/%d %H:%M:%S"].notna().tolist() == [False] * 10 + [True, True, False]
    assert out["%Y/%m/%d %H:%M:%S"][10] == pd.Timestamp("2020-06-04 20:45:34", tz="UTC")


def test_slashed_moments_read_only_valid_moments():
    """Moments written with slashes, as spreadsheets and SQL Server export them ("9/30/1990 0:00:00"): a one-digit
    hour, seconds or none, month-first or day-first; an impossible date or hour reads as no moment."""
    import ibis

    from privsynth.engine.values import clean_text, moment_from_text

    texts = ["9/30/1990 0:00:00", "11/29/1993 13:05", "2/29/2021 0:00:00", "2/29/2020 0:00", "13/01/2021 5:00:00",
             "9/30/1990 24:00:00", "9/30/1990", "2020/06/04 7:45:34"]
    table = ibis.memtable(pd.DataFrame({"v": texts}))
    read = {f: moment_from_text(clean_text(table.v), f) for f in ("%m/%d/%Y %H:%M:%S", "%d/%m/%Y %H:%M:%S",
                                                                   "%Y/%m/%d %H:%M:%S")}
    out = table.select(**read).to_pandas()
    month_first = out["%m/%d/%Y %H:%M:%S"]
    assert month_first.notna().tolist() == [True, True, False, True, False, False, False, False]
    assert month_first[1] == pd.Timestamp("1993-11-29 13:05", tz="UTC")
    assert out["%d/%m/%Y %H:%M:%S"].notna().tolist() == [False, False, False, False, True, False, False, False]
    assert out["%Y/%m/%d %H:%M:%S"][7] == pd.Timestamp("2020-06-04 07:45:34", tz="UTC")


@pytest.mark.parametrize(("grains", "form"), [((1000, 0, 0, 0), "%m/%d/%Y %H:%M:%S"), ((0, 0, 0, 0), "%m/%d/%Y"),
                                              ((100, 0, 0, 0), "%m/%d/%Y")])
def test_slashed_moments_are_told_from_slashed_dates_by_their_grains(grains, form):
    """A slashed column's moments count in the slashed classes by their dates and in the grain slots by their time
    of day: most of them with a time make the column a timestamp written the same way."""
    facts = _facts(month_first=600, slash=400, distinct=300, decimals=(*grains, *(0,) * (F.PLACES - 4)))
    decided = F.decide(facts, "text")
    assert decided.value_format == form and decided.kind == ("timestamp" if "%H" in form else "date")


def test_utc_moments_marked_with_a_z_are_read_decided_and_written_with_it(tmp_path):
    """ISO moments written with a Z ("2012-01-01T06:16:41Z", as JSON and APIs write UTC), stored as strings, came
    back without it: a reader takes such text for local time. The Z is counted in the grain slots (ZULU slots
    after the grain: still one slot a row), decided under DP and written back; the grain reads both halves."""
    import ibis

    from privsynth.discovery.forms import ZULU, date_format
    from privsynth.engine.values import clean_text, moment_from_text

    texts = ["2012-01-01T06:16:41Z", "2012-01-01T06:16:41", "2012-01-01 06:00:00Z", "2012-01-01Z", "2012-13-01T00:00Z"]
    table = ibis.memtable(pd.DataFrame({"v": texts}))
    read = table.select(m=moment_from_text(clean_text(table.v), "%Y-%m-%dT%H:%M:%SZ")).to_pandas()["m"]
    assert read.notna().tolist() == [True, True, True, False, False]
    assert read[0] == pd.Timestamp("2012-01-01 06:16:41", tz="UTC")
    zulu = _facts(timestamp=3000, distinct=2900, decimals=(*(0,) * ZULU, 0, 3000, *(0,) * (F.PLACES - ZULU - 2)))
    assert date_format(zulu) == "%Y-%m-%dT%H:%M:%SZ" and moment_resolution(zulu) == "hour"
    plain = _facts(timestamp=3000, distinct=2900, decimals=(0, 3000, *(0,) * (F.PLACES - 2)))
    assert date_format(plain) is None and moment_resolution(plain) == "hour"

    rng = np.random.default_rng(0)
    n = 4000
    moments = pd.Timestamp("2012-01-01") + pd.to_timedelta(rng.integers(0, 365 * 24, n), unit="h")
    frame = pd.DataFrame({"sent": [m.strftime("%Y-%m-%dT%H:%M:%SZ") for m in moments],
                          "spam": rng.choice(["yes", "no"], n, p=[0.1, 0.9])})
    source = tmp_path / "mail.parquet"
    frame.to_parquet(source, index=False)
    release = privsynth.synthesize(str(source), None, epsilon=3.0, unlimited=True, output=tmp_path / "run",
                                   ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}", release_store=tmp_path / "store",
                                   mechanism="reduced_space", rows=1000, seed=0)
    schema = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    assert schema["sent"]["type"] == "timestamp" and schema["sent"]["format"] == "%Y-%m-%dT%H:%M:%SZ"
    assert schema["sent"]["resolution"] == "hour"
    written = pd.read_parquet(release.run_dir / "synthetic.parquet")["sent"].dropna()
    assert len(written) > 900 and written.str.fullmatch(r"2012-[0-9]{2}-[0-9]{2}T[0-9]{2}:00:00Z").all()


def test_slashed_moments_come_back_as_slashed_moments(tmp_path):
    """A column of bird strikes' dates written "9/30/1990 0:00:00" (a month-first date and a midnight time) was
    text of 3,186 values and came back all <out-of-domain>; it is read as moments, decided under DP, and written
    back in its form, at midnight, inside the real range."""
    from conftest import PINNED_RUN_ID, pinned_ledger

    rng = np.random.default_rng(0)
    n = 4000
    days = pd.Timestamp("1990-01-01") + pd.to_timedelta(rng.integers(0, 3_000, n), unit="D")
    frame = pd.DataFrame({"struck": [f"{d.month}/{d.day}/{d.year} 0:00:00" for d in days],
                          "birds": rng.choice(["1", "2-10", "11-100"], n, p=[0.8, 0.15, 0.05])})
    source = tmp_path / "strikes.csv"
    frame.to_csv(source, index=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("privsynth.run.prepare.new_run_id", lambda: PINNED_RUN_ID)
        release = privsynth.synthesize(str(source), None, epsilon=3.0, unlimited=True, output=tmp_path / "run",
                                       ledger=pinned_ledger(tmp_path / "ledger.sqlite"),
                                       release_store=tmp_path / "store", mechanism="reduced_space", rows=1000, seed=0)
    schema = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    assert schema["struck"]["type"] == "timestamp" and schema["struck"]["format"] == "%m/%d/%Y %H:%M:%S"
    written = pd.read_parquet(release.run_dir / "synthetic.parquet")["struck"].dropna()
    moments = pd.to_datetime(written, format="%m/%d/%Y %H:%M:%S")
    assert len(moments) > 0.9 * 1000 and (moments.dt.normalize() == moments).all()
    low, high = (pd.Timestamp(b) for b in schema["struck"]["bounds"])  # DP bounds: near the real ones
    assert moments.min() >= low and moments.max() <= high
    assert moments.between(days.min(), days.max()).mean() >= 0.95


def test_a_stored_double_s_decimals_are_read_totally():
    """The decimals a typed float column is written with (its precision, decided under DP like a text
    column's): a decimal's binary round-off is no decimal, and a hostile value is NULL, never an error."""
    import ibis

    from privsynth.engine.values import decimals_of

    values = [6.9, 7.0, 2.881, 2.7478, 0.1 + 0.2, 1 / 3, -12.5, 1e300, float("inf"), float("-inf"), float("nan"),
              None, 9.2233720368547758e18, 123456.78]
    table = ibis.memtable(pd.DataFrame({"v": pd.array(values, dtype="Float64")}))
    out = [None if pd.isna(k) else int(k) for k in table.select(k=decimals_of(table.v, 5)).to_pandas()["k"]]
    assert out == [1, 0, 3, 4, 1, 5, 1, None, None, None, None, None, None, 2]


def test_a_stored_number_s_place_is_read_totally():
    """A stored number's place: whole thousands, hundreds and tens read exactly at any size below 2^53, decimals
    below DECIMALS_LIMIT, NULL where neither can be read and for zero (a multiple of every power: no evidence of a
    step either way); never an error."""
    import ibis

    from privsynth.engine.values import decimals_of

    values = [0.0, 40.0, 1200.0, 3000.0, 7.0, -250.0, 1e7, 123456789.0, 6.9, 2.5e6 + 0.5, 1e300, float("nan"),
              None, 1e15 + 10.0, 6.904679999999999]
    table = ibis.memtable(pd.DataFrame({"v": pd.array(values, dtype="Float64")}))
    out = [None if pd.isna(k) else int(k) for k in table.select(k=decimals_of(table.v, 5, fewest=-3)).to_pandas()["k"]]
    assert out == [None, -1, -2, -3, 0, -1, -3, 0, 1, None, None, None, None, -1, 5]


def test_a_text_number_s_place_is_read_from_its_digits():
    """The places slot of a number written as text: tens to thousands by the zeros ending its integer part (past a
    thousands separator, before a sign), decimals by the digits after its point; a zero has a slot of its own."""
    import ibis

    texts = ["0", "40", "1,200", "$10,000", "7", "2.50", "150%", "-40", "12", "0.5", "40.0", "10,050", "0,000", "n/a",
             None]
    table = ibis.memtable(pd.DataFrame({"t": texts}))
    slot = decimals_bin(read_text(table.t))
    out = [None if pd.isna(k) else int(k) for k in table.select(k=slot).to_pandas()["k"]]
    assert out == [F.ZERO, 2, 1, 0, 3, 5, 2, 2, 3, 4, 4, 2, None, None, None]  # "0,000" reads as no number


def test_no_precision_where_no_number_shows():
    """A places histogram and class counts within their noise show no numbers: no precision is made up."""
    facts = F.NoisyFacts("c", tuple(0.0 for _ in F.CLASSES), 50.0, 1.0, 1.0, (0, 0, 0, 2, 0, 1, 0, 0, 0, 0), 1.0)
    assert written_precision(facts) is None


def _draws(name, exact_classes, distinct, places, rho, declared, seeds=300):
    from conftest import SeededDraws

    classes = np.zeros(len(F.CLASSES))
    for cls, count in exact_classes.items():
        classes[F.CLASSES.index(cls)] = count
    exact = F.ExactFacts(classes, float(distinct), np.asarray(places, dtype=float))
    return [F.decide(F.release(name, exact, rho, SeededDraws(s)), declared) for s in range(seeds)]


def test_a_small_wide_table_s_stored_numbers_keep_their_form():
    """At a 41- to 70-column table's facts noise (about 300 a class, 310-410 a slot), stored doubles are decided
    from the two classes a stored number can fall in, and their precision from the slots it keeps or the class
    counts: before, 2,556 whole game counts stayed undecided floats (15 decimals in 29% of draws, else 1), 2,784
    fielding percentages (3 decimals) had 15 in 21% of draws, and pollution shares written 0.25 or 0.75 (half of
    4,654) came back with one decimal in half of them."""
    games = _draws("home_games", {"missing": 228, "whole": 2_556}, 47, [0, 0, 183, 2_373, 0, 0, 0, 0, 0, 0],
                   2.541e-5, "float")
    assert all(d.kind == "integer" for d in games)
    fielding = [d.precision for d in _draws("fielding", {"fraction": 2_784}, 116, [0, 0, 0, 0, 3, 273, 2_508, 0, 0, 0],
                                             2.541e-5, "float")]
    assert None not in fielding and fielding.count(3) >= 0.9 * len(fielding)
    shares = [d.precision for d in _draws("pollution", {"whole": 878, "fraction": 3_776}, 6,
                                          [0, 0, 0, 878, 1_461, 2_315, 0, 0, 0, 0], 1.488e-5, "float")]
    assert shares.count(2) >= 0.94 * len(shares)  # 96% of 3,000 draws


def test_a_float_of_cents_seldom_gets_a_decimal_more():
    """A float written with two decimals (15,000 values) at a 28-column table's facts rho: the noise of the finer
    slots, one slot at a time at three deviations, gave it a third decimal, a fourth or none in one draw of 170,
    and every value then had a form the column never holds."""
    draws = _draws("price", {"fraction": 15_000}, 3_000, [0, 0, 0, 0, 1_500, 13_500, 0, 0, 0, 0], 3.7e-5, "float",
                   seeds=3_000)
    assert [d.precision for d in draws].count(2) >= 0.997 * len(draws)


def test_undecided_stored_counts_are_written_whole():
    """Case counts a table stores as doubles because 86% are missing (1,000 present at a 60-column table's noise,
    268 a class): their class counts are inconclusive, and they are written whole, not as 0.3 or 0.99; a float of
    prices in cents under the same noise keeps its two decimals in most draws, one in the others (a finer slot
    must stand out: one decimal more would write every value in a form the column never holds)."""
    counts = _draws("cases", {"missing": 6_240, "whole": 1_000}, 250, [0, 20, 150, 700, 0, 0, 0, 0, 0, 130],
                    1.737e-5, "float")
    assert sum("too noisy" in d.reason for d in counts) >= 0.9 * len(counts)
    assert sum(d.kind == "integer" or d.precision == 0 for d in counts) >= 0.98 * len(counts)
    prices = [d.precision for d in _draws("price", {"missing": 5_700, "fraction": 1_500}, 900,
                                          [0, 0, 0, 0, 0, 1_500, 0, 0, 0, 0], 1.737e-5, "float")]
    # of 3,000 draws: two decimals in 54-56%, none in 1.2-1.4%, and a form the prices never hold (0, 3 or 4
    # decimals) in under 1%
    assert prices.count(2) >= 0.48 * len(prices) and prices.count(None) <= 0.05 * len(prices)
    assert sum(p in (1, 2, None) for p in prices) >= 0.98 * len(prices)


@pytest.mark.parametrize(("slots", "declared", "precision"), [
    ((0, 0, 1000, 0), "integer", -1),          # whole tens: wind directions
    ((50, 950, 0, 0), "integer", -2),          # hundreds, some of them thousands
    ((1000, 0, 0, 0), "integer", -3),
    ((100, 100, 100, 700), "integer", None),   # units
    ((0, 0, 1000, 2), "integer", -1),          # a few units within the noise
    ((0, 0, 200, 0, 0, 0, 0, 0, 0, 5000), "integer", -1),  # wind directions, 96% calm: zeros show no step
    ((0, 0, 2, 1), "integer", None),           # nothing stands out
    ((0, 0, 1000, 0), "text", -1),             # text read as whole tens
])
def test_an_integer_s_place_is_decided_from_noisy_counts(slots, declared, precision):
    counts = {"whole": sum(slots), "decimals": (*slots, *(0,) * (F.PLACES - len(slots)))}
    assert F.decide(_facts(**counts), declared).precision == precision


def test_a_step_needs_evidence_beyond_the_noise():
    """House years 1872-2010 (2,930 rows) at a 74-column table's facts noise (800 a slot): the 2,780 years that are
    no whole thousand were within three deviations of nothing, and a few noisy thousands made every year 2000. A
    step now needs its finer values, beyond doubt, to be at most a twentieth of the column (noise alone still passes
    that in about one draw of 7,000: 3 of 20,000 seeds); wind directions in whole tens (26,115 readings at a
    15-column table's noise, 190 a slot) keep theirs."""
    from conftest import SeededDraws

    def exact(slots):
        classes = np.zeros(len(F.CLASSES))
        classes[F.CLASSES.index("whole")] = sum(slots)
        return F.ExactFacts(classes, 100.0, np.asarray([*slots, *(0.0,) * (F.PLACES - len(slots))], dtype=float))

    years = exact([150.0, 30.0, 280.0, 2_470.0])
    rho = 1.0 / (2 * 800.0 ** 2) / (1 - 2 * F.CLASS_SHARE)
    stepped = sum(F.decide(F.release("Year_Built", years, rho, SeededDraws(s)), "integer").precision is not None
                  for s in range(2_000))
    assert stepped <= 2
    directions = exact([0.0, 1_000.0, 23_859.0, 0.0, *(0.0,) * 5, 1_256.0])  # 1,256 calm readings: zeros
    rho = 1.0 / (2 * 190.0 ** 2) / (1 - 2 * F.CLASS_SHARE)
    steps = [F.decide(F.release("wind_dir", directions, rho, SeededDraws(s)), "float").precision for s in range(500)]
    assert set(steps) <= {-1, None} and steps.count(-1) >= 0.95 * len(steps)


def test_a_name_never_decides_alone(tmp_path):
    """Issue 35.4: a two-level column named "street" was dropped as an identifier by its name. With a DP pass
    the column's facts decide: kept where few values repeat, dropped where nearly every row has its own."""
    rng = np.random.default_rng(0)
    n = 3000
    frame = pd.DataFrame({"street": rng.choice(["Grvl", "Pave"], n), "customer_id": np.arange(n),
                          "email": [f"u{i}@example.org" for i in range(n)], "price": rng.integers(1, 100, n)})
    source = tmp_path / "t.csv"
    frame.to_csv(source, index=False)
    release = privsynth.synthesize(str(source), None, epsilon=1.0, unlimited=True, output=tmp_path / "run",
                                   ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}", release_store=tmp_path / "store",
                                   mechanism="reduced_space", rows=200)
    columns = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    assert not columns["street"].get("drop") and set(columns["street"]["categories"]) == {"Grvl", "Pave"}
    assert columns["customer_id"].get("drop") and columns["email"].get("drop")
    assert "u1@example.org" not in (release.run_dir / "schema.yaml").read_text()


def test_the_formats_are_named_alike_on_every_floor():
    """The schema (lowest floor), the facts' classes and the readers (engine) name the same formats."""
    from typing import get_args

    from privsynth.schema.model import Column

    stated = set(get_args(Column.model_fields["format"].annotation)[0].__args__)
    assert stated == {"plain"} | set(NUMBER_FORMATS) | set(DATE_FORMATS)
    assert set(NUMBER_FORMAT_CLASSES) == set(NUMBER_FORMATS)
