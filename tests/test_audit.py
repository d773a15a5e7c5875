"""Tests for the accuracy audit (privsynth.report.internal_audit)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from privsynth.report.internal_audit import (
    build_audit,
    column_distributions,
    headline,
    marginal_error_summary,
    plot_columns,
    render_markdown,
    tstr_score,
)
from privsynth.schema import parse_schema
from privsynth.schema.encoding import Domain, domain_of

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _random_codes(domain: Domain, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, s, n) for s in domain.sizes]).astype(np.int32)


def test_identical_data_has_zero_error():
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    codes = _random_codes(domain, 200, 1)
    summary = marginal_error_summary(codes, codes.copy(), domain)
    assert set(summary) == {"1", "2", "3"}
    for stats in summary.values():
        assert stats["mean_tv"] == 0.0 and stats["max_tv"] == 0.0 and stats["max_abs_cell_error"] == 0.0
    assert [summary[k]["n_marginals"] for k in ("1", "2", "3")] == [4, 6, 4]


def test_row_order_and_table_size_do_not_matter():
    domain = Domain(("a", "b", "c"), (3, 2, 4))
    codes = _random_codes(domain, 100, 2)
    doubled = np.concatenate([codes, codes])[::-1]
    summary = marginal_error_summary(codes, doubled, domain)
    assert all(stats["max_tv"] == pytest.approx(0.0, abs=1e-15) for stats in summary.values())


def test_disjoint_data_has_tv_one():
    domain = Domain(("a", "b", "c"), (2, 3, 2))
    real = np.zeros((10, 3), dtype=np.int32)
    synth = np.array([[1, 1, 1], [1, 2, 1]] * 5, dtype=np.int32)
    summary = marginal_error_summary(real, synth, domain)
    for stats in summary.values():
        assert stats["mean_tv"] == pytest.approx(1.0)
        assert stats["max_tv"] == pytest.approx(1.0)
    # 1-way: attribute a is [1,0] vs [0,1] -> cell error 1.
    assert summary["1"]["max_abs_cell_error"] == pytest.approx(1.0)


def test_hand_computed_example():
    # Two binary attributes.
    # real:  (0,0) (0,1) (1,0) (1,1)   -> a = [1/2, 1/2], b = [1/2, 1/2], ab = [1/4]*4
    # synth: (0,0) (0,0) (0,1) (1,1)   -> a = [3/4, 1/4], b = [1/2, 1/2], ab = [1/2, 1/4, 0, 1/4]
    domain = Domain(("a", "b"), (2, 2))
    real = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.int32)
    synth = np.array([[0, 0], [0, 0], [0, 1], [1, 1]], dtype=np.int32)
    summary = marginal_error_summary(real, synth, domain, ks=(1, 2))
    # TV(a) = 0.5 * (1/4 + 1/4) = 1/4, TV(b) = 0 -> mean 1/8, max 1/4; max cell error 1/4.
    # The independent model of a 1-way marginal is the marginal itself: TV 0.
    assert summary["1"] == {"mean_tv": pytest.approx(0.125), "max_tv": pytest.approx(0.25),
                            "max_abs_cell_error": pytest.approx(0.25), "n_marginals": 2, "worst_marginal": ["a"],
                            "independent_mean_tv": 0.0, "independent_max_tv": 0.0}
    # ab: |1/4-1/2| + 0 + |1/4-0| + 0 = 1/2 -> TV 1/4; max cell error 1/4. The real a and b are
    # independent (product [1/4]*4 equals ab), so the independent model scores 0.
    assert summary["2"] == {"mean_tv": pytest.approx(0.25), "max_tv": pytest.approx(0.25),
                            "max_abs_cell_error": pytest.approx(0.25), "n_marginals": 1, "worst_marginal": ["a", "b"],
                            "independent_mean_tv": pytest.approx(0.0), "independent_max_tv": pytest.approx(0.0)}
    # A dependent real table: (0,0) x2, (1,1) x2 -> ab = [1/2, 0, 0, 1/2], product [1/4]*4 -> TV 1/2.
    dependent = np.array([[0, 0], [0, 0], [1, 1], [1, 1]], dtype=np.int32)
    assert marginal_error_summary(dependent, dependent, domain,
                                  ks=(2,))["2"]["independent_mean_tv"] == pytest.approx(0.5)


def test_orders_beyond_attribute_count_are_skipped():
    domain = Domain(("a", "b"), (2, 2))
    codes = _random_codes(domain, 20, 3)
    assert set(marginal_error_summary(codes, codes, domain)) == {"1", "2"}


def test_subset_selection_is_deterministic_and_bounded():
    domain = Domain(tuple(f"x{i}" for i in range(8)), (3,) * 8)
    real = _random_codes(domain, 300, 4)
    synth = _random_codes(domain, 250, 5)
    a = marginal_error_summary(real, synth, domain, max_marginals=10, seed=7)
    b = marginal_error_summary(real, synth, domain, max_marginals=10, seed=7)
    assert a == b
    assert a["1"]["n_marginals"] == 8  # fewer than 10 exist: all of them
    assert a["2"]["n_marginals"] == 10 and a["3"]["n_marginals"] == 10
    full = marginal_error_summary(real, synth, domain)
    assert a["3"]["max_tv"] <= full["3"]["max_tv"] + 1e-12
    c = marginal_error_summary(real, synth, domain, max_marginals=10, seed=8)
    assert c["3"] != a["3"]  # a different seed picks a different subset


def test_rejects_bad_inputs():
    domain = Domain(("a", "b"), (2, 2))
    good = np.zeros((4, 2), dtype=np.int32)
    with pytest.raises(ValueError, match="columns"):
        marginal_error_summary(good[:, :1], good, domain)
    with pytest.raises(ValueError, match="at least one row"):
        marginal_error_summary(good, good[:0], domain)
    with pytest.raises(ValueError, match="outside"):
        marginal_error_summary(good, good + 2, domain)
    with pytest.raises(ValueError, match="max_marginals"):
        marginal_error_summary(good, good, domain, max_marginals=0)


def test_adult_sized_table_covers_every_marginal():
    # Adult's shape and level counts: 48,842 rows x 15 attributes, 455 3-way marginals.
    # (Speed is measured in benchmarks/, never asserted here.)
    sizes = (13, 9, 8, 16, 16, 7, 15, 6, 5, 2, 6, 5, 9, 42, 2)
    domain = Domain(tuple(f"x{i}" for i in range(len(sizes))), sizes)
    real = _random_codes(domain, 48_842, 10)
    synth = _random_codes(domain, 48_842, 11)
    summary = marginal_error_summary(real, synth, domain)
    assert [summary[k]["n_marginals"] for k in ("1", "2", "3")] == [15, 105, 455]
    assert all(0.0 < summary[k]["mean_tv"] <= summary[k]["max_tv"] <= 1.0 for k in ("1", "2", "3"))


# ---------------------------------------------------------------- columns and plots

def _small_schema():
    return parse_schema({
        "name": "toy",
        "columns": [
            {"name": "colour", "type": "categorical",
             "categories": ["red", "green", "a very long category label indeed"]},
            {"name": "age", "type": "integer", "bounds": [0, 100], "bins": [0, 30, 60, 100], "nullable": True},
            {"name": "flag", "type": "boolean"},
            {"name": "country/region", "type": "categorical", "categories": [f"c{i}" for i in range(30)]},
        ],
    })


def test_column_distributions_hand_computed():
    schema = _small_schema()
    real = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 1, 2], [0, 3, 0, 3]], dtype=np.int32)
    synth = np.array([[0, 0, 0, 0], [0, 0, 1, 1]], dtype=np.int32)
    dist = column_distributions(real, synth, schema)
    assert list(dist) == ["colour", "age", "flag", "country/region"]
    assert dist["colour"]["labels"] == ["red", "green", "a very long category label indeed"]
    assert dist["colour"]["real"] == pytest.approx([0.5, 0.25, 0.25])
    assert dist["colour"]["synthetic"] == pytest.approx([1.0, 0.0, 0.0])
    assert dist["colour"]["tv"] == pytest.approx(0.5)
    assert dist["age"]["labels"][-1] == "<missing>" and len(dist["age"]["real"]) == 4
    assert dist["flag"]["tv"] == pytest.approx(0.0)
    for d in dist.values():
        assert sum(d["real"]) == pytest.approx(1.0) and sum(d["synthetic"]) == pytest.approx(1.0)


def test_plots_are_small_valid_pngs(tmp_path):
    import matplotlib.image as mpimg

    schema = _small_schema()
    domain = domain_of(schema)
    dist = column_distributions(_random_codes(domain, 500, 20), _random_codes(domain, 400, 21), schema)
    paths = plot_columns(dist, tmp_path / "plots")
    assert len(paths) == 4 and len({p.name for p in paths}) == 4
    for path in paths:
        assert path.parent == tmp_path / "plots"
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        assert path.stat().st_size < 100_000
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert paths[3].name == "03_country_region.png"  # unsafe characters replaced, order kept


# ---------------------------------------------------------------- TSTR

def test_tstr_on_separable_problem_beats_majority():
    # Target (attribute 0) equals attribute 1; attribute 2 is noise. Classes are unbalanced so the
    # majority baseline is well above chance but far from perfect.
    domain = Domain(("y", "x", "noise"), (3, 3, 4))
    rng = np.random.default_rng(0)

    def table(n):
        y = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        return np.column_stack([y, y, rng.integers(0, 4, n)]).astype(np.int32)

    real, synth = table(2000), table(1500)
    score = tstr_score(real, synth, domain, target=0, seed=1)
    assert score["majority_baseline"] == pytest.approx(0.5, abs=0.06)
    assert score["tstr_accuracy"] > 0.99 and score["trtr_accuracy"] > 0.99
    assert score["n_test_real"] == 600 and score["n_train_real"] == 1400 and score["n_train_synthetic"] == 1500
    # Synthetic rows that break the target-feature link cannot do better than guessing from priors.
    broken = synth.copy()
    broken[:, 1] = rng.permutation(broken[:, 1])
    bad = tstr_score(real, broken, domain, target=0, seed=1)
    assert bad["tstr_accuracy"] < 0.6 < score["tstr_accuracy"]
    assert tstr_score(real, synth, domain, target=0, seed=1) == score


def test_tstr_subsamples_training_rows(monkeypatch):
    import privsynth.report.internal_audit as audit_module

    monkeypatch.setattr(audit_module, "_MAX_TRAIN_ROWS", 300)
    domain = Domain(("y", "x"), (2, 3))
    score = tstr_score(_random_codes(domain, 1000, 1), _random_codes(domain, 800, 2), domain, target=0)
    assert score["n_train_real"] == 300 and score["n_train_synthetic"] == 300 and score["n_test_real"] == 300


def test_tstr_validates_target():
    domain = Domain(("y", "x"), (2, 2))
    codes = _random_codes(domain, 50, 0)
    with pytest.raises(ValueError, match="target"):
        tstr_score(codes, codes, domain, target=2)


# ---------------------------------------------------------------- whole audit and reports

def test_build_audit_is_internal_json_and_renders(tmp_path):
    schema = _small_schema()
    domain = domain_of(schema)
    real = _random_codes(domain, 600, 30)
    synth = _random_codes(domain, 500, 31)
    audit = build_audit(real, synth, schema, domain, tmp_path, target_column="flag")
    assert audit["visibility"] == "internal" and audit["differentially_private"] is False
    assert "NOT differentially private" in audit["notice"]
    assert json.loads(json.dumps(audit)) == audit
    assert audit["marginals"] == marginal_error_summary(real, synth, domain)
    assert audit["tstr"]["target"] == "flag"
    assert all((tmp_path / name).is_file() for name in audit["plots"])

    paths = [tmp_path / name for name in audit["plots"]]
    md = render_markdown(audit, paths)
    assert md.startswith("# INTERNAL")
    assert "NOT differentially private" in md
    assert "| 3 | 4 |" in md  # 4 three-way marginals over 4 attributes
    for name in audit["plots"]:
        assert f"]({name})" in md
    assert "country/region" in md and "Train on synthetic" in md

    nested = render_markdown(audit, paths, relative_to=tmp_path.parent)
    assert f"]({tmp_path.name}/{audit['plots'][0]})" in nested
    embedded = render_markdown(audit, paths, embed=True)
    uri = embedded.split("](data:image/png;base64,", 1)[1].split(")", 1)[0]
    assert base64.b64decode(uri)[:8] == PNG_SIGNATURE

    line = headline(audit)
    assert line.startswith("audit (internal): mean TV 1-way ")
    assert "3-way" in line and "TSTR" in line and "\n" not in line


def test_build_audit_without_target_and_with_subset(tmp_path):
    schema = _small_schema()
    domain = domain_of(schema)
    codes = _random_codes(domain, 100, 40)
    audit = build_audit(codes, codes, schema, domain, tmp_path, max_marginals=2, seed=3)
    assert audit["tstr"] is None
    assert audit["marginals"]["2"]["n_marginals"] == 2
    assert headline(audit).startswith("audit (internal): mean TV 1-way 0.000 (independent 0.000), 2-way 0.000 "
                                      "(independent ")
    assert "At most 2 marginals" in render_markdown(audit, [])


def test_build_audit_rejects_mismatches(tmp_path):
    schema = _small_schema()
    domain = domain_of(schema)
    codes = _random_codes(domain, 50, 50)
    with pytest.raises(ValueError, match="domain does not match"):
        build_audit(codes, codes, schema, Domain(domain.names, (9,) * 4), tmp_path)
    with pytest.raises(ValueError, match="target_column"):
        build_audit(codes, codes, schema, domain, tmp_path, target_column="nope")


# ---------------------------------------------------------------- quality report and bound coverage (audit_quality)

def test_column_shapes_and_pair_trends_by_hand():
    from privsynth.report.audit_quality import column_pair_trends, column_shapes

    domain = Domain(("a", "b"), (2, 2))
    real = np.array([[0, 0], [0, 0], [1, 1], [1, 1]])
    synth = np.array([[0, 1], [0, 1], [1, 0], [1, 0]])  # same columns, opposite dependence
    shapes = column_shapes(real, synth, domain)
    assert shapes["columns"] == {"a": 1.0, "b": 1.0} and shapes["score"] == 1.0
    trends = column_pair_trends(real, synth, domain)
    (pair,) = trends["pairs"]
    assert pair["columns"] == ["a", "b"] and pair["synthetic"] == pytest.approx(0.0)   # TV 1
    assert pair["independent"] == pytest.approx(0.5)  # real [.5,0,0,.5] vs product [.25]*4: TV 0.5


def test_bound_coverage_checks_each_bound_at_its_granularity():
    from privsynth.report.audit_quality import bound_coverage

    domain = Domain(("a", "b"), (3, 2))
    real = np.array([[0, 0], [1, 0], [2, 1], [2, 1]])
    synth = np.array([[0, 0], [2, 0], [1, 1], [2, 1]])
    report = {"columns": [{"column": "a", "status": "bound", "tv_bound": 0.3, "level_groups": [[0, 1, 1]]},
                          {"column": "b", "status": "not measured"}],
              "pairs": [{"columns": ["a", "b"], "status": "bound", "tv_bound": 0.4, "level_groups": None}]}
    cov = bound_coverage(report, real, synth, domain)
    # a on merged levels {0}, {1, 2}: real [.25, .75] = synthetic: TV 0, covered
    # (a, b) on original levels: real {00:.25, 10:.25, 21:.5}, synth {00:.25, 20:.25, 11:.25, 21:.25}: TV 0.5 > 0.4
    assert [(c["columns"], c["real_tv"], c["covered"]) for c in cov["checks"]] == [
        (["a"], 0.0, True), (["a", "b"], 0.5, False)]
    assert cov["1"] == {"bounded": 1, "covered": 1, "fraction": 1.0} and cov["2"]["fraction"] == 0.0


def test_quality_pictures_and_audit_html_are_labelled_internal(tmp_path):
    from privsynth.report.audit_quality import write_quality

    schema = parse_schema({"name": "q", "columns": [
        {"name": "x", "type": "categorical", "categories": ["u", "v"]},
        {"name": "y", "type": "categorical", "categories": ["p", "q", "r"]}]})
    domain = domain_of(schema)
    real, synth = _random_codes(domain, 300, 2), _random_codes(domain, 200, 3)
    quality = write_quality(real, synth, schema, domain, None, tmp_path)
    assert quality["visibility"] == "internal" and quality["bound_coverage"] is None
    page = (tmp_path / "audit.html").read_text()
    assert "INTERNAL" in page and page.count("data:image/png;base64,") == 2 + domain.n_attributes
    for rel in [quality["figures"]["column_shapes"], quality["figures"]["pair_trends"], *quality["figures"]["columns"]]:
        assert (tmp_path / rel).read_bytes()[:8] == PNG_SIGNATURE
