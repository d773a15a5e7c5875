"""Binarisation: exact codes for every level, missing and out-of-domain values, bins, and bit layouts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL, load_schema, parse_schema
from privsynth.schema.encoding import (
    Domain,
    category_text,
    decode_codes,
    domain_of,
    encode_codes,
    from_binary,
    from_one_hot,
    one_hot,
    one_hot_names,
    to_binary,
)

# Expected codes of the tiny frame (conftest), column by column:
#   color: red green blue <missing>=3 purple-><out-of-domain>=4 red green blue
#   size : S M L XL S M L XL
#   age  : bins [0,18) [18,40) [40,65) [65,100]; 0 17 18 39 40 65 100 50
#   score: bins [0,.25) [.25,.5) [.5,1]; 0 .25 .49 .5 1.0 <missing>=3 .75 .1
#   member: True False <missing>=2 True False True False True
TINY_CODES = np.array([
    [0, 1, 2, 3, 4, 0, 1, 2],
    [0, 1, 2, 3, 0, 1, 2, 3],
    [0, 0, 1, 1, 2, 3, 3, 2],
    [0, 1, 1, 2, 2, 3, 2, 0],
    [1, 0, 2, 1, 0, 1, 0, 1],
]).T


def test_domain_of_tiny(tiny_schema):
    domain = domain_of(tiny_schema)
    assert domain.names == ("color", "size", "age", "score", "member")
    assert domain.sizes == (5, 4, 4, 4, 3)
    np.testing.assert_array_equal(domain.offsets, [0, 5, 9, 13, 17, 20])
    assert domain.width == 20
    assert domain.binary_widths == (3, 2, 2, 2, 2)
    assert domain.binary_width == 11
    assert domain.size_of((0, 2)) == 20
    assert Domain.from_json(domain.to_json()) == domain
    assert len(one_hot_names(tiny_schema)) == domain.width
    assert one_hot_names(tiny_schema)[3] == f"color={MISSING_LABEL}"


@pytest.mark.parametrize("names, sizes", [((), ()), (("a",), (2, 3)), (("a",), (0,))])
def test_domain_validation(names, sizes):
    with pytest.raises(ValueError):
        Domain(names, sizes)


def test_a_domain_states_which_levels_are_an_ordered_scale(tiny_schema):
    """A number column's bins are a scale (``Domain.ordered``, read by aim's compression); categories, booleans,
    coded values and the missing level are not. The fact is public (the schema's) and not part of equality."""
    domain = domain_of(tiny_schema)
    assert domain.ordered == (0, 0, 4, 3, 0)          # age's 4 bins, score's 3 bins (then <missing>)
    assert Domain.from_json(domain.to_json()).ordered == domain.ordered
    assert domain == Domain(domain.names, domain.sizes) and Domain(domain.names, domain.sizes).ordered == ()
    coded = parse_schema({"name": "t", "columns": [{"name": "educ", "type": "integer", "values": [0, 1, 2]}]})
    assert domain_of(coded).ordered == (0,)
    with pytest.raises(ValueError, match="ordered levels"):
        Domain(("a", "b"), (3, 2), ordered=(4, 0))
    with pytest.raises(ValueError, match="ordered levels"):
        Domain(("a", "b"), (3, 2), ordered=(3,))


def test_encode_tiny_frame(tiny_schema, tiny_frame):
    codes = encode_codes(tiny_frame, tiny_schema)
    assert codes.dtype == np.int32 and codes.shape == (8, 5)
    np.testing.assert_array_equal(codes, TINY_CODES)


def test_every_category_round_trips(tiny_schema):
    rng = np.random.default_rng(0)
    domain = domain_of(tiny_schema)
    # Every level of every attribute, as a full grid over the columns' levels cycled together.
    n = max(domain.sizes)
    codes = np.stack([np.arange(n) % s for s in domain.sizes], axis=1).astype(np.int32)
    decoded = decode_codes(codes, tiny_schema, rng)
    np.testing.assert_array_equal(encode_codes(decoded, tiny_schema), codes)
    assert decoded["color"].iloc[:3].tolist() == ["red", "green", "blue"]
    assert decoded["size"].iloc[:4].tolist() == ["S", "M", "L", "XL"]
    assert decoded["color"].iloc[4] == OUT_OF_DOMAIN_LABEL
    assert pd.isna(decoded["color"].iloc[3])
    assert decoded["member"].iloc[:3].tolist()[:2] == [False, True] and pd.isna(decoded["member"].iloc[2])
    assert pd.isna(decoded["score"].iloc[3])


def test_bin_boundaries_are_left_closed_and_last_bin_closed():
    schema = parse_schema({"name": "t", "columns": [
        {"name": "x", "type": "float", "bounds": [0, 10], "bins": [0, 2.5, 5, 10]},
        {"name": "n", "type": "integer", "bounds": [1, 9], "bins": [1, 3, 9]},
    ]})
    frame = pd.DataFrame({"x": [0.0, 2.4999, 2.5, 4.999, 5.0, 9.99, 10.0],
                          "n": [1, 2, 3, 8, 9, 3, 2]})
    codes = encode_codes(frame, schema)
    np.testing.assert_array_equal(codes[:, 0], [0, 0, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(codes[:, 1], [0, 0, 1, 1, 1, 1, 0])


def test_clip_and_fail_out_of_domain(tiny_schema, tiny_frame):
    frame = tiny_frame.copy()
    frame["age"] = [-5, 150, 18, 39, 40, 65, 100, 1000]
    codes = encode_codes(frame, tiny_schema)
    np.testing.assert_array_equal(codes[:, 2], [0, 3, 1, 1, 2, 3, 3, 3])
    frame = tiny_frame.copy()
    frame["score"] = [0.0, 0.25, 0.49, 0.5, 1.0001, None, 0.75, -0.1]  # fail: score does not clip
    with pytest.raises(ValueError, match=r"column 'score': value\(s\) outside the schema's domain") as info:
        encode_codes(frame, tiny_schema)
    assert "1.0001" not in str(info.value) and "-0.1" not in str(info.value)


def test_category_outside_domain_fails_when_not_allowed(tiny_schema, tiny_frame):
    frame = tiny_frame.copy()
    frame.loc[2, "size"] = "XXL"
    with pytest.raises(ValueError, match=r"column 'size': value\(s\) outside") as info:
        encode_codes(frame, tiny_schema)
    assert "XXL" not in str(info.value)


def test_null_in_non_nullable_column(tiny_schema, tiny_frame):
    frame = tiny_frame.copy()
    frame.loc[0, "size"] = None
    with pytest.raises(ValueError, match=r"column 'size': missing value\(s\) but the column is not nullable"):
        encode_codes(frame, tiny_schema)
    frame = tiny_frame.copy()
    frame["age"] = frame["age"].astype(float)
    frame.loc[1, "age"] = np.nan
    with pytest.raises(ValueError, match="column 'age'.*missing"):
        encode_codes(frame, tiny_schema)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, "abc"])
def test_non_finite_numeric(tiny_schema, tiny_frame, bad):
    frame = tiny_frame.copy().astype({"age": object})
    frame.loc[3, "age"] = bad
    with pytest.raises(ValueError, match=r"column 'age': value\(s\) that are not finite numbers"):
        encode_codes(frame, tiny_schema)


def test_missing_schema_column(tiny_schema, tiny_frame):
    with pytest.raises(ValueError, match=r"missing schema column\(s\) \['member'\]"):
        encode_codes(tiny_frame.drop(columns=["member"]), tiny_schema)
    # A dropped column need not be present.
    encode_codes(tiny_frame.drop(columns=["id"]), tiny_schema)


def test_boolean_spellings():
    schema = parse_schema({"name": "t", "columns": [{"name": "b", "type": "boolean", "nullable": True}]})
    frame = pd.DataFrame({"b": [True, False, "true", "false", "True", "FALSE", 1, 0, "1", "0", None, 1.0, np.True_]})
    codes = encode_codes(frame, schema)[:, 0]
    np.testing.assert_array_equal(codes, [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 2, 1, 1])
    with pytest.raises(ValueError, match=r"column 'b': value\(s\) outside"):
        encode_codes(pd.DataFrame({"b": ["yes"]}), schema)
    nullable = pd.DataFrame({"b": pd.array([True, None, False], dtype="boolean")})
    np.testing.assert_array_equal(encode_codes(nullable, schema)[:, 0], [1, 2, 0])


def test_integer_coded_categories_with_missing_values():
    # An integer-coded category column with a null arrives as float64 (1.0, NaN, 2.0): it must match "1", "2".
    schema = parse_schema({"name": "t", "columns": [
        {"name": "k", "type": "categorical", "categories": ["1", "2", "10"], "nullable": True}]})
    for column in ([1.0, np.nan, 2.0, 10.0], pd.array([1, None, 2, 10], dtype="Int64"), [1, None, 2, 10.0],
                   ["1", None, "2", "10"]):
        codes = encode_codes(pd.DataFrame({"k": column}), schema)[:, 0]
        np.testing.assert_array_equal(codes, [0, 3, 1, 2])
    with pytest.raises(ValueError, match="outside"):
        encode_codes(pd.DataFrame({"k": [1.5]}), schema)


def test_category_text():
    assert category_text(pd.Series([1.0, np.nan, 2.5])).tolist()[::2] == ["1", "2.5"]
    assert pd.isna(category_text(pd.Series([1.0, np.nan])).iloc[1])
    assert category_text(pd.Series(["a", "b"])).tolist() == ["a", "b"]
    assert category_text(pd.Series([3, 4])).tolist() == ["3", "4"]


def test_categorical_dtype_input(tiny_schema, tiny_frame):
    frame = tiny_frame.copy()
    frame["size"] = frame["size"].astype("category")
    frame["color"] = frame["color"].astype("category")
    np.testing.assert_array_equal(encode_codes(frame, tiny_schema), TINY_CODES)


@pytest.mark.parametrize("seed", [0, 1])
def test_numeric_decode_lands_inside_the_bin(seed):
    schema = parse_schema({"name": "t", "columns": [
        {"name": "n", "type": "integer", "bounds": [0, 10], "bins": [0, 1, 4, 10]},
        {"name": "x", "type": "float", "bounds": [-1, 1], "bins": [-1, -0.5, 0.5, 1]},
    ]})
    rng = np.random.default_rng(seed)
    codes = np.stack([np.repeat([0, 1, 2], 2000), np.tile([0, 1, 2], 2000)], axis=1).astype(np.int32)
    decoded = decode_codes(codes, schema, rng)
    n = decoded["n"].to_numpy(dtype=np.int64)
    assert set(n[codes[:, 0] == 0]) == {0}
    assert set(n[codes[:, 0] == 1]) == {1, 2, 3}          # [1, 4): 4 is not in the bin
    assert set(n[codes[:, 0] == 2]) == set(range(4, 11))  # last bin [4, 10] includes the upper bound
    x = decoded["x"].to_numpy(dtype=np.float64)
    edges = np.array([-1, -0.5, 0.5, 1])
    assert np.all(x >= edges[codes[:, 1]]) and np.all(x <= edges[codes[:, 1] + 1])
    assert np.all(x[codes[:, 1] < 2] < edges[codes[:, 1] + 1][codes[:, 1] < 2])
    # Decoding spreads values over the bin instead of piling them on a midpoint.
    assert len(np.unique(x)) > 5000
    np.testing.assert_array_equal(encode_codes(decoded, schema), codes)


def test_decode_rejects_wrong_shape(tiny_schema):
    with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
        decode_codes(np.zeros((3, 4), dtype=np.int32), tiny_schema, np.random.default_rng(0))


def test_one_hot_round_trip(tiny_schema, tiny_frame):
    domain = domain_of(tiny_schema)
    codes = encode_codes(tiny_frame, tiny_schema)
    bits = one_hot(codes, domain)
    assert bits.shape == (8, domain.width) and bits.dtype == np.uint8
    assert np.all(bits.sum(axis=1) == domain.n_attributes)
    for j in range(domain.n_attributes):
        block = bits[:, domain.offsets[j]: domain.offsets[j + 1]]
        np.testing.assert_array_equal(block.sum(axis=1), 1)
        np.testing.assert_array_equal(block.argmax(axis=1), codes[:, j])
    np.testing.assert_array_equal(from_one_hot(bits, domain), codes)
    # Relaxed rows decode to the arg-max level of each block.
    relaxed = bits * 0.6 + 0.4 / np.repeat(domain.sizes, domain.sizes)[None, :]
    np.testing.assert_array_equal(from_one_hot(relaxed, domain), codes)
    with pytest.raises(ValueError, match="width 20"):
        from_one_hot(bits[:, :-1], domain)


def test_binary_round_trip_and_invalid_codes():
    domain = Domain(("a", "b", "c", "d"), (5, 2, 1, 8))
    assert domain.binary_widths == (3, 1, 0, 3)
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, s, 500) for s in domain.sizes], axis=1).astype(np.int32)
    bits = to_binary(codes, domain)
    assert bits.shape == (500, 7) and set(np.unique(bits)) <= {0, 1}
    back, invalid = from_binary(bits, domain)
    np.testing.assert_array_equal(back, codes)
    assert not invalid.any()
    # Most significant bit first: code 4 of attribute a is 100.
    np.testing.assert_array_equal(to_binary(np.array([[4, 1, 0, 6]], dtype=np.int32), domain), [[1, 0, 0, 1, 1, 1, 0]])
    # Codes 5, 6, 7 of a 5-level attribute are invalid and map to code mod 5.
    cube = np.array([[1, 0, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 0, 1, 1, 1]], dtype=np.uint8)
    back, invalid = from_binary(cube, domain)
    np.testing.assert_array_equal(back[:, 0], [0, 2, 3])
    np.testing.assert_array_equal(invalid[:, 0], [True, True, False])
    assert not invalid[:, 1:].any()
    with pytest.raises(ValueError, match="width 7"):
        from_binary(cube[:, :6], domain)


def test_binary_all_single_level():
    domain = Domain(("a",), (1,))
    bits = to_binary(np.zeros((3, 1), dtype=np.int32), domain)
    assert bits.shape == (3, 0)
    codes, invalid = from_binary(bits, domain)
    np.testing.assert_array_equal(codes, 0)
    assert not invalid.any()


@pytest.fixture(scope="module")
def adult(adult_schema_path, adult_data_path):
    """The bundled Adult table as pandas reads it (an empty field is missing)."""
    schema = load_schema(adult_schema_path)
    frame = pd.read_csv(adult_data_path, keep_default_na=False, na_values=[""])
    return frame, schema


def test_adult_codes_decode_encode_exactly(adult):
    frame, schema = adult
    assert len(frame) == 48842
    codes = encode_codes(frame, schema)
    domain = domain_of(schema)
    assert codes.shape == (48842, 15)
    assert np.all(codes >= 0) and np.all(codes < np.array(domain.sizes))
    # Missing workclass / occupation / native_country get their own level.
    workclass = schema.column("workclass")
    assert (codes[:, 1] == workclass.labels.index(MISSING_LABEL)).sum() == frame["workclass"].isna().sum() > 0
    decoded = decode_codes(codes, schema, np.random.default_rng(0))
    np.testing.assert_array_equal(encode_codes(decoded, schema), codes)
    # Categorical columns decode to their exact labels.
    for name in ("education", "sex", "income"):
        assert (decoded[name].astype(str) == frame[name].astype(str)).all()


def test_out_of_range_codes_refused():
    domain = Domain(("a", "b"), (3, 2))
    for bad in (np.array([[3, 0]]), np.array([[0, -1]]), np.array([[0, 0, 0]])):
        with pytest.raises(ValueError, match="codes"):
            one_hot(bad.astype(np.int32), domain)
        with pytest.raises(ValueError, match="codes"):
            to_binary(bad.astype(np.int32), domain)
    with pytest.raises(ValueError, match=r"attribute\(s\) \['a'\]"):
        one_hot(np.array([[3, 1]], dtype=np.int32), domain)
    assert one_hot(np.zeros((0, 2), dtype=np.int32), domain).shape == (0, 5)


def test_float_precision_rounds_synthetic_values_inside_their_bins():
    import numpy as np

    from privsynth.schema import parse_schema
    from privsynth.schema.encoding import decode_codes

    schema = parse_schema({"name": "money", "columns": [
        {"name": "amount", "type": "float", "bounds": [0.0, 1000.0], "bins": [0.0, 10.005, 500.0, 1000.0],
         "precision": 2}]})
    codes = np.repeat(np.array([[0], [1], [2]]), 2000, axis=0)
    values = decode_codes(codes, schema, np.random.default_rng(0))["amount"].to_numpy(dtype=float)
    assert np.allclose(values, np.round(values, 2))
    assert np.all(values[:2000] >= 0) and np.all(values[:2000] <= 10.005)
    assert np.all(values[2000:4000] >= 10.01) and np.all(values[4000:] <= 1000.0)
    for kind, places in (("integer", 1), ("integer", 0), ("float", -1)):
        with pytest.raises(Exception, match="precision"):
            parse_schema({"name": "x", "columns": [{"name": "n", "type": kind, "bounds": [0, 9], "bins": [0, 9],
                                                    "precision": places}]})


def test_an_integer_column_in_whole_tens_decodes_to_whole_tens():
    """Wind directions written in whole tens (precision -1): a draw of 231 or 247 inside a bin is a value the
    column never holds; it takes the nearest ten of its sub-bin, else of its bin, and still encodes to its level.
    A bin holding no whole ten keeps its draws (discovery's edges never make one: ``edges_holding_values``)."""
    import numpy as np

    from privsynth.schema import parse_schema
    from privsynth.schema.encoding import decode_codes, encode_codes, sub_edges

    schema = parse_schema({"name": "wind", "columns": [
        {"name": "direction", "type": "integer", "bounds": [0, 360], "bins": [0, 1, 91, 231, 245, 360],
         "precision": -1},
        {"name": "fee", "type": "integer", "bounds": [0, 10_000], "bins": [0, 2_500, 10_000], "precision": -3}]})
    codes = np.column_stack([np.tile(np.arange(5), 2000), np.tile(np.arange(2), 5000)])
    frame = decode_codes(codes, schema, np.random.default_rng(0))
    direction, fee = frame["direction"].to_numpy(dtype=float), frame["fee"].to_numpy(dtype=float)
    assert np.all(direction % 10 == 0) and np.all(fee % 1000 == 0)
    assert set(direction[codes[:, 0] == 0]) == {0.0} and set(direction[codes[:, 0] == 3]) == {240.0}
    assert set(direction[codes[:, 0] == 4]) <= set(range(250, 361, 10)) and direction.max() == 360.0
    assert np.array_equal(encode_codes(frame, schema), codes)
    sub = sub_edges(schema.columns[0])
    fine = {"direction": {"edges": sub.tolist(), "noisy_counts": np.ones(len(sub) - 1).tolist(), "scale": 0.0}}
    frame = decode_codes(codes, schema, np.random.default_rng(1), fine=fine)
    assert np.all(frame["direction"].to_numpy(dtype=float) % 10 == 0)
    assert np.array_equal(encode_codes(frame, schema), codes)


def test_a_sub_bin_narrower_than_the_precision_sends_its_draws_to_the_bins_grid():
    """Ages written in tenths (precision 1) in a discovered bin [6.53125, 6.71875): fine decoding's 16 sub-bins
    are 0.0117 wide, and most hold no tenth. A draw in such a sub-bin (6.583) went out unrounded, in no real
    form and below the data's 6.6; it now takes the nearest tenth of its bin, and still encodes to its level."""
    import numpy as np

    from privsynth.schema import parse_schema
    from privsynth.schema.encoding import decode_codes, encode_codes, sub_edges

    schema = parse_schema({"name": "people", "columns": [
        {"name": "age", "type": "float", "bounds": [6.53125, 16.0], "bins": [6.53125, 6.71875, 16.0],
         "precision": 1}]})
    sub = sub_edges(schema.columns[0])
    counts = np.zeros(len(sub) - 1)
    counts[:16] = 100.0  # every sub-bin of the first bin weighs alike: most draws land where no tenth lies
    counts[16:] = 10.0
    fine = {"age": {"edges": sub.tolist(), "noisy_counts": counts.tolist(), "scale": 0.0}}
    codes = np.repeat(np.array([[0], [1]]), 3000, axis=0)
    frame = decode_codes(codes, schema, np.random.default_rng(0), fine=fine)
    age = frame["age"].to_numpy(dtype=float)
    assert np.allclose(age, np.round(age, 1))
    assert set(np.round(age[:3000], 1)) <= {6.6, 6.7}
    assert np.array_equal(encode_codes(frame, schema), codes)


def test_float_precision_keeps_values_in_their_bin_when_an_edge_is_on_the_grid():
    """A bin [0, 0.01) at precision 2 holds only 0.00: rounding a draw up to the edge 0.01 would move it
    to the next level (half the draws did), so decode -> encode must give back the same codes."""
    import numpy as np

    from privsynth.schema import parse_schema
    from privsynth.schema.encoding import decode_codes, encode_codes

    schema = parse_schema({"name": "fees", "columns": [
        {"name": "fee", "type": "float", "bounds": [0.0, 1000.0], "bins": [0.0, 0.01, 99.9, 100.0, 1000.0],
         "precision": 2},
        {"name": "pct", "type": "float", "bounds": [0.0, 100.0], "bins": [0.0, 95.0, 99.9, 100.0], "precision": 1},
        {"name": "odd", "type": "float", "bounds": [0.0, 1.0], "bins": [0.0, 0.001, 0.004, 1.0], "precision": 2}]})
    codes = np.column_stack([np.tile(np.arange(4), 3000), np.tile(np.arange(3), 4000), np.tile(np.arange(3), 4000)])
    frame = decode_codes(codes, schema, np.random.default_rng(0))
    assert np.array_equal(encode_codes(frame, schema), codes)
    fee = frame["fee"].to_numpy(dtype=float)
    assert np.all(fee[codes[:, 0] == 0] == 0.0) and np.all(fee[codes[:, 0] == 3] <= 1000.0)
    pct = frame["pct"].to_numpy(dtype=float)
    assert np.allclose(pct, np.round(pct, 1)) and np.all(pct[codes[:, 1] == 2] >= 99.9)
    odd = frame["odd"].to_numpy(dtype=float)  # [0.001, 0.004) holds no cent: its draws stay unrounded
    assert np.all((odd[codes[:, 2] == 1] >= 0.001) & (odd[codes[:, 2] == 1] < 0.004))


# ---------------------------------------------------------------- dates and timestamps

DATES = parse_schema({"name": "dates", "columns": [
    {"name": "d", "type": "date", "bounds": ["2010-01-01", "2020-12-31"], "bin_by": "year", "nullable": True},
    {"name": "ts", "type": "timestamp", "bounds": ["1969-12-31", "1970-01-03"], "bin_by": "day",
     "on_out_of_domain": "clip"},
    {"name": "q", "type": "date", "bounds": ["2019-01-01", "2019-12-31"], "bin_by": "quarter"},
]})


def test_dates_and_timestamps_encode_exactly_from_every_spelling():
    import datetime as dt

    frame = pd.DataFrame({
        # Python date, ISO text (padded), a pandas Timestamp with a time of day (its day), missing
        "d": [dt.date(2010, 1, 1), " 2019-06-01 ", None, pd.Timestamp("2020-12-31 23:00"), "2011-01-01",
              dt.date(2010, 12, 31)],
        # half a second before the epoch is second -1 (floor), a clipped low and high value, the last second of a day
        "ts": pd.to_datetime(["1969-12-31 23:59:59.5", "1970-01-01", "1900-01-01", "2030-01-01", "1970-01-01 05:00",
                              "1970-01-02 23:59:59.999"], format="ISO8601"),
        "q": ["2019-03-31", "2019-04-01", "2019-12-31", "2019-06-30T23:59:59", "2019-07-01", "2019-09-30"],
    })
    codes = encode_codes(frame, DATES)
    assert codes[:, 0].tolist() == [0, 9, 11, 10, 1, 0]
    assert codes[:, 1].tolist() == [0, 1, 0, 2, 1, 2]
    assert codes[:, 2].tolist() == [0, 1, 3, 1, 2, 2]
    # the same with a zoned timestamp column: converted to UTC first
    zoned = frame.assign(ts=frame["ts"].dt.tz_localize("UTC").dt.tz_convert("America/New_York"))
    np.testing.assert_array_equal(encode_codes(zoned, DATES), codes)


@pytest.mark.parametrize("column, values, problem", [
    ("d", ["2019-01-01", "not a date"], "column 'd' has value(s) that are not dates (the schema says date)"),
    ("ts", ["1970-01-01", "12:00 tomorrow"],
     "column 'ts' has value(s) that are not timestamps (the schema says timestamp)"),
    ("q", ["2019-01-01", "2020-01-01"], "column 'q': value(s) outside the schema's domain"),
    ("q", ["2019-01-01", None], "column 'q': missing value(s) but the column is not nullable"),
])
def test_date_faults_name_the_column_and_not_the_value(column, values, problem):
    frame = pd.DataFrame({"d": ["2019-01-01"] * 2, "ts": ["1970-01-01"] * 2,
                          "q": ["2019-05-05"] * 2}).assign(**{column: values})
    with pytest.raises(ValueError) as info:
        encode_codes(frame, DATES)
    assert str(info.value) == problem


def test_dates_decode_to_whole_days_and_seconds_inside_their_bins_with_date_and_timestamp_arrow_types():
    import pyarrow as pa

    from privsynth.schema.encoding import arrow_schema

    rng = np.random.default_rng(5)
    n = 4000
    codes = np.column_stack([rng.integers(0, 12, n), rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(np.int32)
    frame = decode_codes(codes, DATES, rng)
    table = pa.Table.from_pandas(frame, schema=arrow_schema(DATES), preserve_index=False)
    assert table.schema.field("d").type == pa.date32() and table.schema.field("ts").type == pa.timestamp("us")
    assert table.schema.field("q").type == pa.date32()
    assert frame["d"].isna().sum() == (codes[:, 0] == 11).sum()  # <missing> decodes to missing
    # exact round trip: each value encodes back to its code, and whole days / whole seconds
    np.testing.assert_array_equal(encode_codes(frame, DATES), codes)
    nanoseconds = frame["ts"].astype("datetime64[ns]").astype("int64")
    seconds = nanoseconds // 10**9
    assert (nanoseconds % 10**9 == 0).all() and seconds.min() >= -86400 and seconds.max() <= 2 * 86400
    # values spread over the bin: the first quarter's draws cover most of its 90 days
    first_quarter = frame.loc[codes[:, 2] == 0, "q"]
    assert first_quarter.nunique() > 60 and first_quarter.max() <= pd.Timestamp("2019-03-31").date()
