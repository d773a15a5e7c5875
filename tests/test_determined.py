"""Columns a schema states are determined by another (``determined_by``): the schema's public structural zeros
are checked when it is read, held at zero by aim, kept by the rounding stage, and no synthetic record breaks them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import privsynth
from privsynth.mechanisms.aim import mechanism as aim
from privsynth.mechanisms.aim.compression import Compression, compress_levels
from privsynth.mechanisms.aim.zeros import keep_levels, zero_potentials
from privsynth.mechanisms.catalogue import load
from privsynth.mechanisms.rounding import round_release, suppress_levels
from privsynth.privacy.noise import SeededNoise
from privsynth.schema import SchemaError, parse_schema
from privsynth.schema.determined import structural_zeros
from privsynth.schema.encoding import domain_of, encode_codes
from privsynth.schema.workload import Histogram

GROUP_EDGES = [18, 30, 40, 60, 91]  # the groups 18-29, 30-39, 40-59, 60+ (the last holds 90)
SCHEMA = {
    "name": "survey",
    "columns": [
        {"name": "age", "type": "integer", "bounds": [18, 90], "bins": [18, 25, 30, 35, 40, 50, 60, 90],
         "nullable": True},
        {"name": "ageGroup", "type": "categorical", "categories": ["18-29", "30-39", "40-59", "60+"], "nullable": True,
         "determined_by": {"column": "age", "levels": {"18-29": [18, 30], "30-39": [30, 40], "40-59": [40, 60],
                                                       "60+": [60, 90]}}},
        {"name": "degree", "type": "categorical", "categories": ["none", "school", "college"]},
        {"name": "years", "type": "integer", "values": [0, 12, 16],
         "determined_by": {"column": "degree", "levels": {0: ["none"], 12: ["school"], 16: ["college"]}}},
        {"name": "smoker", "type": "boolean"},
    ],
}


def with_rule(column: str, rule: dict) -> dict:
    columns = [dict(c, determined_by=rule) if c["name"] == column else c for c in SCHEMA["columns"]]
    return dict(SCHEMA, columns=columns)


def survey(n: int, seed: int = 0) -> pd.DataFrame:
    """Rows that keep both rules; ages and degrees dependent on the smoker flag."""
    rng = np.random.default_rng(seed)
    smoker = rng.random(n) < 0.3
    age = np.where(smoker, rng.integers(18, 45, n), rng.integers(30, 90, n))
    group = pd.cut(age, GROUP_EDGES, right=False, labels=["18-29", "30-39", "40-59", "60+"]).astype(str)
    degree = rng.choice(["none", "school", "college"], n, p=[0.2, 0.5, 0.3])
    years = pd.Series(degree).map({"none": 0, "school": 12, "college": 16})
    frame = pd.DataFrame({"age": age.astype("float"), "ageGroup": group, "degree": degree, "years": years,
                          "smoker": smoker})
    missing = rng.random(n) < 0.05  # an unanswered age: its group is unanswered too
    frame.loc[missing, ["age", "ageGroup"]] = None
    return frame


def forbidden_share(codes: np.ndarray, schema) -> float:
    zeros = structural_zeros(schema)
    bad = np.zeros(len(codes), dtype=bool)
    for z in zeros:
        bad |= ~z.allowed[codes[:, z.attributes[0]], codes[:, z.attributes[1]]]
    return float(bad.mean())


def test_the_rules_give_the_forbidden_cells_a_hand_count_gives():
    schema = parse_schema(SCHEMA)
    zeros = {z.names: z for z in structural_zeros(schema)}
    by_age = zeros[("age", "ageGroup")]
    assert by_age.attributes == (0, 1)
    assert by_age.allowed.shape == (8, 5)  # 7 age bins + <missing>, 4 groups + <missing>
    # each of the 7 age bins allows one of the 4 groups (and <missing>): 7 x 3 forbidden
    assert by_age.forbidden_cells == 21
    assert by_age.allowed[2, 1] and not by_age.allowed[2, 0]  # [30, 35) is 30-39, never 18-29
    assert by_age.allowed[7].all() and by_age.allowed[:, 4].all()  # <missing> on either side is free
    by_degree = zeros[("degree", "years")]
    assert by_degree.attributes == (2, 3) and by_degree.forbidden_cells == 6
    assert by_degree.allowed.diagonal().all()


@pytest.mark.parametrize("column, rule, expected", [
    ("ageGroup", {"column": "height", "levels": {"18-29": [18, 30]}}, "no column 'height'"),
    ("ageGroup", {"column": "age", "levels": {"18-29": [18, 31]}}, "must run between two of column 'age'"),
    ("ageGroup", {"column": "age", "levels": {"18-29": [18, 30], "30-39": [25, 40]}}, "listed under two levels"),
    ("ageGroup", {"column": "age", "levels": {"teens": [18, 25]}}, "'teens' is not a category of column"),
    ("ageGroup", {"column": "ageGroup", "levels": {"18-29": ["18-29"]}}, "cannot be determined by itself"),
    ("years", {"column": "degree", "levels": {12: ["school"], 14: ["college"]}}, "'14' is not a value of column"),
    ("years", {"column": "degree", "levels": {12: ["high school"]}}, "'high school' is not a category"),
])
def test_a_rule_that_does_not_fit_the_columns_is_refused_naming_what_was_expected(column, rule, expected):
    with pytest.raises(SchemaError, match=expected):
        parse_schema(with_rule(column, rule))


def test_a_dropped_source_or_a_temporal_column_is_refused():
    dropped = dict(SCHEMA, columns=[dict(c, drop=True) if c["name"] == "age" else c for c in SCHEMA["columns"]])
    with pytest.raises(SchemaError, match="is dropped; the source must be kept"):
        parse_schema(dropped)
    moments = dict(SCHEMA, columns=[*SCHEMA["columns"], {
        "name": "day", "type": "date", "bounds": ["2020-01-01", "2020-12-31"], "bin_by": "month",
        "determined_by": {"column": "degree", "levels": {"2020-01-01": ["none"]}}}])
    with pytest.raises(SchemaError, match="'determined_by' applies to categorical, boolean, integer, float"):
        parse_schema(moments)


def test_a_written_schema_reads_back_the_same_and_the_rule_is_part_of_its_identity():
    schema = parse_schema(SCHEMA)
    again = parse_schema(yaml.safe_load(yaml.safe_dump(schema.model_dump(mode="json"))))
    assert again == schema and again.content_hash() == schema.content_hash()
    plain = dict(SCHEMA, columns=[{k: v for k, v in c.items() if k != "determined_by"} for c in SCHEMA["columns"]])
    assert parse_schema(plain).content_hash() != schema.content_hash()  # a release drawn without it is not reused


def _release(codes, domain, zeros, seed=0):
    config = aim.Config(epsilon=0.3, delta=1e-9, iterations_per_round=30, final_iterations=100)
    noise = SeededNoise(seed, "determined")
    noise.authorize("determined")
    release = aim.run(aim.collect_statistics(Histogram.of_codes(codes), domain, config), domain, config, noise,
                      zeros=zeros)
    return release, round_release(release, domain, codes.shape[0], noise.post_rng)


def test_aim_holds_the_zeros_at_no_cost_where_its_noise_fills_them_otherwise():
    schema = parse_schema(SCHEMA)
    codes, domain = np.asarray(encode_codes(survey(3000), schema)), domain_of(schema)
    zeros = structural_zeros(schema)
    assert forbidden_share(codes, schema) == 0.0
    plain, plain_codes = _release(codes, domain, ())
    held, held_codes = _release(codes, domain, zeros)
    assert forbidden_share(plain_codes, schema) > 0.01  # noise puts records in cells no rule allows
    assert forbidden_share(held_codes, schema) == 0.0
    # public facts only: the cells held, from the schema; the cost is the config's
    assert held.public_facts["structural_zeros"] == {"age x ageGroup": 21, "degree x years": 6}
    assert plain.public_facts["structural_zeros"] == {}
    assert held.public_facts["rho"] == plain.public_facts["rho"]
    assert [m.noisy_counts.tolist() for m in held.measurements[:5]] == \
        [m.noisy_counts.tolist() for m in plain.measurements[:5]]  # the start's measurements are the same draws


def test_compression_merges_a_pairs_levels_only_where_they_allow_the_same_partner_levels():
    zeros = structural_zeros(parse_schema(SCHEMA))
    identity = [np.arange(n) for n in (8, 5, 3, 3, 2)]

    def merged(levels):  # age's ``levels`` merged into one last group, the others kept in order
        kept = [x for x in range(8) if x not in levels]
        group = np.empty(8, dtype=int)
        group[kept] = np.arange(len(kept))
        group[list(levels)] = len(kept)
        return Compression((group, *identity[1:]))

    alike = merged([0, 1])  # [18, 25) and [25, 30): both 18-29
    assert np.array_equal(keep_levels(alike, zeros).groups[0], alike.groups[0])
    table = zero_potentials(zeros, keep_levels(alike, zeros))[(0, 1)]
    assert table.shape == (7, 5) and np.isinf(table[6, 1]) and table[6, 0] == 0.0  # the merged level: 18-29
    unlike = merged([1, 2])  # [25, 30) is 18-29, [30, 35) is 30-39
    assert np.array_equal(keep_levels(unlike, zeros).groups[0], np.arange(8))
    mixed = merged([0, 1, 4, 7])  # two of 18-29, one of 40-59, <missing>: the two alike stay merged
    assert keep_levels(mixed, zeros).groups[0].tolist() == [6, 6, 0, 1, 2, 3, 4, 5]
    # age's bins are a scale: two runs of rare bins, [25, 35) across two groups (split), [40, 60) in one (kept)
    runs = compress_levels([np.array([90.0, 1.0, 2.0, 90.0, 3.0, 4.0, 90.0, 90.0])] + [np.full(n, 90.0)
                                                                                   for n in (5, 3, 3, 2)],
                           [10.0] * 5, ordered=(7, 0, 0, 0, 0))
    assert runs.groups[0].tolist() == [0, 1, 1, 2, 3, 3, 4, 5]
    assert keep_levels(runs, zeros).groups[0].tolist() == [0, 1, 2, 3, 4, 4, 5, 6]


def test_replacing_an_unsupported_missing_value_keeps_the_zeros():
    schema = parse_schema(SCHEMA)
    zeros = structural_zeros(schema)
    rng = np.random.default_rng(0)
    # ageGroup <missing> (code 4) beside ages of every bin; donors of every group
    ages = rng.integers(0, 7, 400)
    group = np.array([0, 0, 1, 1, 2, 2, 3])[ages]
    group[:100] = 4
    codes = np.column_stack([ages, group, np.zeros(400, int), np.zeros(400, int), np.zeros(400, int)])
    kept = suppress_levels(codes, {1: (4,)}, rng, zeros)
    assert not (kept[:, 1] == 4).any() and forbidden_share(kept, schema) == 0.0
    anywhere = suppress_levels(codes, {1: (4,)}, np.random.default_rng(0))
    assert forbidden_share(anywhere, schema) > 0.05  # a donor from any record breaks the rule


def test_only_aim_takes_the_zeros():
    assert load("aim").takes_structural_zeros
    assert not any(load(name).takes_structural_zeros for name in ("rap", "reduced_space", "microaggregation"))


def test_a_run_releases_no_record_against_the_schemas_rules(tmp_path):
    frame = survey(1500, seed=3)
    frame.loc[:9, "ageGroup"] = "60+"  # dirty rows against the rule are read, never a failure
    release = privsynth.synthesize(frame, parse_schema(SCHEMA), epsilon=1.0, seed=5, unlimited=True,
                                   output=tmp_path / "run", ledger=f"sqlite:///{tmp_path}/ledger.sqlite",
                                   mechanism="aim", options={"max_rounds": 8, "iterations_per_round": 20,
                                                             "final_iterations": 60})
    synthetic = release.to_pandas()
    assert len(synthetic) > 1000
    schema = parse_schema(SCHEMA)
    assert forbidden_share(np.asarray(encode_codes(synthetic, schema)), schema) == 0.0
    groups = pd.cut(synthetic["age"].astype(float), GROUP_EDGES, right=False,
                    labels=["18-29", "30-39", "40-59", "60+"]).astype(object)
    present = synthetic["age"].notna() & synthetic["ageGroup"].notna()
    assert (groups[present] == synthetic.loc[present, "ageGroup"].astype(object)).all()
    assert set(synthetic["years"].dropna().astype(int)) <= {0, 12, 16}
    report = json.loads((Path(release.run_dir) / "report.json").read_text())
    assert report["schema_rules"] == [
        {"columns": ["age", "ageGroup"], "forbidden_cells": 21, "synthetic_records_against": 0},
        {"columns": ["degree", "years"], "forbidden_cells": 6, "synthetic_records_against": 0}]
    assert "age x ageGroup: 0 synthetic records against it" in (Path(release.run_dir) / "report.md").read_text()


def test_what_a_release_says_of_the_rules_is_the_same_on_neighbouring_tables():
    """An attacker who adds one record against a rule (an age of 35 in the group 18-29) learns nothing from what
    the release says of the rules: the zeros come from the schema, the facts count cells, not rows."""
    schema = parse_schema(SCHEMA)
    codes, domain = np.asarray(encode_codes(survey(800), schema)), domain_of(schema)
    dirty = codes[:1].copy()
    dirty[0, 0], dirty[0, 1] = 2, 0  # [30, 35) with 18-29
    zeros = structural_zeros(schema)
    facts = [_release(table, domain, zeros, seed=4)[0].public_facts
             for table in (codes, np.vstack([codes, dirty]))]
    assert facts[0]["structural_zeros"] == facts[1]["structural_zeros"] == {"age x ageGroup": 21,
                                                                            "degree x years": 6}


def test_a_boolean_source_reads_true_and_false_as_yaml_writes_them():
    schema = parse_schema(yaml.safe_load("""
name: flags
columns:
  - {name: smoker, type: boolean}
  - {name: risk, type: categorical, categories: [low, high],
     determined_by: {column: smoker, levels: {high: [true], low: [false]}}}
"""))
    (zeros,) = structural_zeros(schema)
    assert zeros.names == ("smoker", "risk") and zeros.allowed[:2, :2].tolist() == [[True, False], [False, True]]


def test_a_replaced_value_keeps_every_rule_of_its_column():
    schema = parse_schema({"name": "two", "columns": [
        {"name": "age", "type": "integer", "bounds": [0, 40], "bins": [0, 10, 20, 30, 40], "nullable": True},
        {"name": "young", "type": "categorical", "categories": ["yes", "no"],
         "determined_by": {"column": "age", "levels": {"yes": [0, 20], "no": [20, 40]}}},
        {"name": "decade", "type": "integer", "values": [0, 10, 20, 30],
         "determined_by": {"column": "age", "levels": {0: [0, 10], 10: [10, 20], 20: [20, 30], 30: [30, 40]}}}]})
    zeros = structural_zeros(schema)
    rng = np.random.default_rng(1)
    age = rng.integers(0, 4, 600)
    codes = np.column_stack([age, (age >= 2).astype(int), age])
    codes[:150, 0] = 4  # <missing> ages, beside groups and decades of every kind
    kept = suppress_levels(codes, {0: (4,)}, rng, zeros)
    assert not (kept[:, 0] == 4).any()
    assert forbidden_share(kept, schema) == 0.0  # a donor matched on one partner alone would break the other
