"""Mass points of a number column (issue 35.3): a sentinel or round value many rows hold is written exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

import privsynth
from privsynth.discovery import points as P
from privsynth.schema import parse_schema
from privsynth.schema.encoding import decode_codes, encode_codes


class NoNoise:
    def add_gaussian(self, x, sigma, *, sensitivity=None):
        return np.asarray(x, dtype=float)


def test_candidates_are_public_and_inside_the_bounds():
    assert P.candidates(0.0, 120.0, integer=False) == (1.0, 9.0, 10.0, 99.0, 100.0)
    assert -1.0 in P.candidates(-5.0, 10.0, False) and 0.0 not in P.candidates(-5.0, 10.0, False)  # the zeros' cell
    assert P.candidates(0.0, 120.0, integer=True) == ()  # a cell per integer already: codes keep all the rho
    assert P.candidates(-1.0, 10_000_000.0, integer=True)[-1] == 9999999.0


def test_a_candidate_is_a_point_when_it_holds_its_share():
    values = np.array([3.5, 99.0, 100.0, 250.0])
    counts = np.array([9000.0, 500.0, 100.0, 400.0])
    points = P.find_points(values, counts, P.candidates(0.0, 300.0, False), rho=1.0, noise=NoNoise(),
                           present=10_000.0)
    assert points == (99.0,)  # 100 holds 1%: below POINT_SHARE


def test_point_bins_decode_to_the_point_exactly():
    edges = P.with_points((0.0, 50.0, 5_000_000.0, 12_000_000.0), (9999999.0,), integer=False)
    assert 9999999.0 in edges and len(edges) == 6
    schema = parse_schema({"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 12_000_000],
                                                     "bins": list(edges)}]})
    codes = encode_codes(pd.DataFrame({"x": [9999999.0, 3.0]}), schema)
    back = decode_codes(codes, schema, np.random.default_rng(0))
    assert back["x"].iloc[0] == 9999999.0
    assert P.with_points((0.0, 10.0, 20.0), (9.0,), integer=True) == (0.0, 9.0, 10.0, 20.0)


@pytest.mark.parametrize("sentinel", [9999999, -1])
def test_a_sentinel_comes_back_exactly_not_smeared(tmp_path, sentinel):
    rng = np.random.default_rng(3)
    n = 20_000
    income = np.round(rng.lognormal(10.5, 0.6, n), 2)
    income[rng.random(n) < 0.05] = sentinel
    pd.DataFrame({"income": income, "g": rng.choice(["a", "b"], n)}).to_csv(tmp_path / "t.csv", index=False)
    release = privsynth.synthesize(str(tmp_path / "t.csv"), epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}",
                                   unlimited=True, seed=5, output=tmp_path / "run", release_store=tmp_path / "s")
    text = (release.run_dir / "schema.yaml").read_text()
    assert "points written exactly" in text
    column = next(c for c in yaml.safe_load(text)["columns"] if c["name"] == "income")
    assert sentinel in column["bins"]
    synthetic = pd.to_numeric(release.to_pandas()["income"])
    assert 0.02 <= (synthetic == sentinel).mean() <= 0.08  # written exactly, at about its share (5%)
