"""Where on the precision grid a decoded value falls (``privsynth.schema.grid``, ``discovery.forms.place_shares``).

Uniform on a column's grid, a column of whole hours with a few halves (precision 1) wrote 37.3 as often as 37.0: one
value in ten whole where the column holds two in three. Discovery's places histogram (a DP fact it already pays for)
counts the values by the decimal place they are whole in; its shares, where they stand out of their noise, weigh the
grid's points, and where they do not, the grid's own density stands in (uniform, as before).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SeededDraws

from privsynth.discovery import facts as F
from privsynth.discovery.forms import PLACES, TENS, ZERO, place_shares
from privsynth.errors import SchemaError
from privsynth.schema import parse_schema
from privsynth.schema.grid import place_density, place_draws, place_exponents


@pytest.mark.parametrize("precision", [-2, -1, 0, 1, 2, 4])
def test_the_grid_s_places_share_it_out(precision):
    density = place_density(precision)
    assert len(density) == len(place_exponents(precision)) == 4 + precision
    assert density.sum() == pytest.approx(1.0)
    grid = np.round(np.arange(0, 20_000) * 10.0 ** -precision, max(precision, 0))
    whole_in = [np.isclose(np.mod(np.round(grid / 10.0 ** e, 6), 1.0), 0.0) for e in place_exponents(precision)]
    exact = [whole_in[0].mean()] + [(w & ~coarser).mean() for w, coarser in zip(whole_in[1:], whole_in[:-1])]
    assert np.allclose(exact, density, atol=1e-3)


def test_a_draw_by_the_grid_s_own_shares_is_uniform_and_by_the_column_s_follows_them():
    rng = np.random.default_rng(0)
    low, high = np.full(60_000, 4.0), np.full(60_000, 4.9)
    uniform = place_draws(low, high, 1, tuple(place_density(1)), rng)
    assert set(np.round(uniform, 1)) == {4.0, 4.1, 4.2, 4.3, 4.4, 4.5, 4.6, 4.7, 4.8, 4.9}
    assert abs((uniform == 4.0).mean() - 0.1) < 0.01
    hours = place_draws(low, high, 1, (0.0, 0.0, 0.0, 0.67, 0.33), rng)  # two whole hours in three
    expected = (0.67 / 0.09) / (0.67 / 0.09 + 9 * 0.33 / 0.9)  # 4.0 against 4.1 .. 4.9, each by its place's weight
    assert abs((hours == 4.0).mean() - expected) < 0.01 and (np.round(hours, 1) == hours).all()
    tens = place_draws(np.full(20_000, 31.0), np.full(20_000, 59.0), 0, (0.0, 0.0, 0.6, 0.4), rng)  # ages heap on tens
    expected = 2 * (0.6 / 0.09) / (2 * 0.6 / 0.09 + 27 * 0.4 / 0.9)  # 40 and 50 against the 27 other whole numbers
    assert abs(np.isin(tens, (40.0, 50.0)).mean() - expected) < 0.02 and ((tens >= 31) & (tens <= 59)).all()
    nothing = place_draws(np.array([4.1]), np.array([4.9]), 1, (0.0, 0.0, 0.0, 1.0, 0.0), rng)
    assert np.isnan(nothing).all()  # no whole number there: the caller keeps its uniform draw


def _facts(decimals: list[float], present: float, rho: float, seed: int = 0) -> F.NoisyFacts:
    classes = np.zeros(len(F.CLASSES))
    classes[F.CLASSES.index("fraction")] = present
    exact = F.ExactFacts(classes, 50.0, np.asarray(decimals, dtype=np.float64))
    return F.release("x", exact, rho, SeededDraws(seed))


def test_place_shares_stand_out_of_their_noise_or_take_the_grid_s():
    decimals = [0.0] * PLACES
    decimals[TENS] = 6700.0       # whole numbers
    decimals[TENS + 1] = 3300.0   # one decimal
    shares = place_shares(_facts(decimals, 10_000.0, 1.0), 1)
    assert shares is not None and len(shares) == 5
    assert shares[3] == pytest.approx(0.67, abs=0.01) and shares[4] == pytest.approx(0.33, abs=0.01)
    assert shares[0] == pytest.approx(1e-4, rel=0.05)  # multiples of 1000 stand nowhere: the grid's own share
    hidden = [0.0] * PLACES
    hidden[TENS + 1] = 30.0
    assert place_shares(_facts(hidden, 30.0, 1e-4), 1) is None  # nothing stands out: drawn uniformly
    zeros = [0.0] * PLACES
    zeros[ZERO] = 5000.0
    zeros[TENS] = 5000.0
    assert place_shares(_facts(zeros, 10_000.0, 1.0), None)[0] > 0.45  # zeros count with the multiples of 1000


@pytest.mark.parametrize(("entry", "message"), [
    ({"type": "float", "precision": 1, "place_shares": [0.1, 0.2]}, "must be 5 non-negative shares"),
    ({"type": "float", "place_shares": [0.1, 0.2, 0.3, 0.4]}, "with a precision"),
    ({"type": "integer", "place_shares": [0.1, -0.2, 0.3, 0.4]}, "non-negative"),
    ({"type": "integer", "place_shares": [0.0, 0.0, 0.0, 0.0]}, "positive sum")])
def test_bad_place_shares_are_refused(entry, message):
    with pytest.raises(SchemaError, match=message):
        parse_schema({"name": "s", "columns": [{"name": "x", "bounds": [0, 9], "bins": [0, 9], **entry}]})


def test_a_run_without_a_schema_writes_whole_hours_as_often_as_the_table_holds_them(tmp_path):
    """Hours worked: two in three whole, the rest halves, written with one decimal. Discovery's places histogram
    shows both places; the release writes whole hours about as often as the table does (uniform on the grid of
    tenths: one in ten, and 37.3 as often as 37.0)."""
    from conftest import pinned_ledger

    import privsynth

    rng = np.random.default_rng(4)
    n = 6000
    hours = rng.integers(20, 60, n) + np.where(rng.random(n) < 0.33, 0.5, 0.0)
    frame = pd.DataFrame({"hours": hours, "team": rng.choice(["a", "b", "c"], n)})
    source = tmp_path / "hours.parquet"
    frame.to_parquet(source, index=False)
    release = privsynth.synthesize(str(source), None, epsilon=1.0, unlimited=True, seed=3, output=tmp_path / "run",
                                   ledger=pinned_ledger(tmp_path / "ledger.sqlite"), release_store=tmp_path / "store")
    written = pd.read_parquet(release.run_dir / "synthetic.parquet")["hours"].dropna().astype(float)
    assert len(written) > 0.9 * n
    whole = (written == np.round(written)).mean()
    halves = np.isclose(np.mod(written, 1.0), 0.5).mean()
    assert whole > 0.5 and whole + halves > 0.75


def test_an_integer_sub_bin_ending_at_the_top_edge_leaves_the_top_value_to_its_own_sub_bin():
    """With fine decoding an integer column's top value b has the sub-bin [b, b + 1] of its own; the sub-bin before it
    ends at b and holds b - 1 at most. Drawn on the grid by place shares, that sub-bin's grid once reached b (tenure
    written 73 where the table ends at 72: 2% of a column's values outside its range)."""
    from privsynth.schema.encoding import decode_codes, sub_edges

    schema = parse_schema({"name": "s", "columns": [
        {"name": "tenure", "type": "integer", "bounds": [0, 72], "bins": [0, 36, 72],
         "place_shares": [0.001, 0.009, 0.09, 0.9]}]})
    sub = np.asarray(sub_edges(schema.columns[0]))
    counts = np.where(sub[:-1] >= 72, 0.0, 10.0)  # no row at 72
    codes = np.ones((5000, 1), dtype=np.int32)  # every row in the top bin [36, 72]
    values = decode_codes(codes, schema, np.random.default_rng(0),
                          {"tenure": {"edges": sub, "noisy_counts": counts, "scale": 1.0}})["tenure"]
    assert values.max() < 72 and values.min() >= 36
