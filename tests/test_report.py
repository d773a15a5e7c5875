"""The DP report's accuracy statements (formulas, coverage, every pair covered), its pictures and
report.html, and the public/private split: the report is a function of the release's outputs only."""

from __future__ import annotations

import base64
import inspect
import itertools
import json
import math
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import TOY_SCHEMA, toy_frame

import privsynth
from privsynth.mechanisms.base import Measurement, Release
from privsynth.report import uncertainty as u
from privsynth.report.dp_report import dp_report, render_report
from privsynth.report.figures import write_public_figures
from privsynth.report.html import render_html
from privsynth.schema import parse_schema
from privsynth.schema.encoding import Domain, domain_of, encode_codes
from privsynth.schema.workload import marginal_counts

SCHEMA = parse_schema(TOY_SCHEMA)
AIM_FAST = dict(mechanism="aim", options={"max_rounds": 6, "iterations_per_round": 20, "final_iterations": 50})


# ---------------------------------------------------------------- formulas against hand-computed values

def test_gaussian_l1_bound_by_hand_and_by_simulation():
    by_hand = 2.0 * (4 * math.sqrt(2 / math.pi) + math.sqrt(8 * math.log(20)))
    assert u.gaussian_l1_quantile(2.0, 4) == pytest.approx(by_hand)
    z = np.random.default_rng(0).normal(0.0, 3.0, size=(20_000, 12))
    assert np.mean(np.abs(z).sum(axis=1) > u.gaussian_l1_quantile(3.0, 12)) <= 0.05


def test_laplace_l1_bound_is_the_gamma_quantile():
    z = np.random.default_rng(1).laplace(0.0, 2.0, size=(40_000, 5))
    miss = np.mean(np.abs(z).sum(axis=1) > u.laplace_l1_quantile(2.0, 5))
    assert miss == pytest.approx(0.05, abs=0.006)  # exact, not just below


def test_tv_bound_by_hand():
    # noise L1 <= 10, fit L1 = 20, total 100: (2*10 + 20) / (2 * 90)
    assert u.tv_bound(10.0, 20.0, 100.0) == pytest.approx(40.0 / 180.0)
    assert u.tv_bound(100.0, 0.0, 90.0) == 1.0  # the noise swamps the total: vacuous, said so


def test_projection_sums_cells_and_keeps_merged_groups():
    domain = Domain(("a", "b", "c"), (2, 3, 4))
    values = np.arange(2 * 2 * 4, dtype=float)  # b merged to 2 levels
    m = Measurement((0, 1, 2), values, "gaussian", 1.0, (None, (0, 1, 1), None))
    out, collapsed, groups = u.project(m, (1,), domain)
    np.testing.assert_allclose(out, values.reshape(2, 2, 4).sum(axis=(0, 2)))
    assert collapsed == 8 and groups == ((0, 1, 1),)
    out, collapsed, groups = u.project(m, (0, 2), domain)
    assert collapsed == 2 and groups == (None, None) and out.size == 8


def test_measurements_combine_with_inverse_variance_weights():
    domain = Domain(("a", "b"), (2, 2))
    one = Measurement((0,), np.array([10.0, 20.0]), "gaussian", 1.0)
    two = Measurement((0, 1), np.array([4.0, 4.0, 12.0, 12.0]), "gaussian", 1.0)  # projected: [8, 24], var 2
    est = u.estimate([one, two], (0,), domain)
    np.testing.assert_allclose(est.values, (np.array([10.0, 20.0]) * 1.0 + np.array([8.0, 24.0]) * 0.5) / 1.5)
    assert est.cell_sd == pytest.approx(math.sqrt(1 / 1.5)) and est.sources == 2
    assert u.estimate([one], (1,), domain) is None  # unsupported


def test_original_levels_are_preferred_to_merged_ones():
    domain = Domain(("a", "b"), (3, 2))
    full = Measurement((0,), np.array([5.0, 5.0, 5.0]), "gaussian", 4.0)
    merged = Measurement((0, 1), np.ones(4), "gaussian", 0.1, ((0, 1, 1), None))
    assert not u.estimate([full, merged], (0,), domain).merged
    assert u.estimate([merged], (0,), domain).merged


def test_bounds_cover_the_real_marginals_in_simulation():
    """Fixed real table, fresh Gaussian noise each trial: each bound holds for >= 95% of trials."""
    rng = np.random.default_rng(3)
    domain = Domain(("a", "b", "c"), (3, 4, 2))
    real = np.column_stack([rng.integers(0, s, 2000) for s in domain.sizes])
    # A poor fit (independent of the real table): the bound must still hold.
    synthetic = np.column_stack([rng.integers(0, s, 1500) for s in domain.sizes])
    covered = {1: [], 2: []}
    for _ in range(300):
        ms = [Measurement((a,), marginal_counts(real, domain, (a,)) + rng.normal(0, 30, domain.sizes[a]),
                          "gaussian", 30.0) for a in range(3)]
        ms.append(Measurement((0, 1), marginal_counts(real, domain, (0, 1)) + rng.normal(0, 20, 12), "gaussian", 20.0))
        columns, pairs, _ = u.marginal_statements(ms, synthetic, domain)
        for r, entry in [((a,), c) for a, c in enumerate(columns)] + [((0, 1), pairs[0])]:
            p = marginal_counts(real, domain, r) / 2000
            q = marginal_counts(synthetic, domain, r) / 1500
            covered[len(r)].append(0.5 * np.abs(p - q).sum() <= entry["tv_bound"])
        assert pairs[1]["status"] == "not measured" and pairs[2]["status"] == "not measured"
    assert np.mean(covered[1]) >= 0.95 and np.mean(covered[2]) >= 0.95


# ---------------------------------------------------------------- the report of a real (small) release

@pytest.fixture(scope="module")
def aim_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-run")
    frame = toy_frame(397, seed=5)  # a prime row count: every real proportion's repr is long, so no report figure
    # rounded to a few decimals can match one by chance
    release = privsynth.synthesize(frame, SCHEMA, epsilon=2.0, seed=11, rows=300, unlimited=True,
                                   output=tmp / "run", ledger=f"sqlite:///{tmp / 'ledger.sqlite'}",
                                   release_store=tmp / "store", **AIM_FAST)
    return Path(release.run_dir), frame


def test_every_column_and_pair_has_an_entry(aim_run):
    run, _ = aim_run
    report = json.loads((run / "report.json").read_text())
    names = [c.name for c in SCHEMA.kept_columns]
    assert [c["column"] for c in report["columns"]] == names
    assert [tuple(p["columns"]) for p in report["pairs"]] == list(itertools.combinations(names, 2))
    for entry in report["columns"] + report["pairs"]:
        if entry["status"] == "bound":
            assert 0.0 <= entry["tv_bound"] <= 1.0 and entry["confidence"] == 0.95
        else:
            assert entry == {**entry, "status": "not measured", "statement": "not measured: no accuracy statement"}
    assert report["accuracy"]["columns"]["bounded"] == len(names)  # AIM measures every column


def test_every_run_writes_report_html_with_embedded_figures(aim_run):
    run, _ = aim_run
    report = json.loads((run / "report.json").read_text())
    html = (run / "report.html").read_text()
    sources = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert len(sources) == len(report["columns"]) + 2
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in html and "https://" not in html and "<script" not in html  # opens offline
    md = (run / "report.md").read_text()
    for path in [report["figures"]["pairs"], report["figures"]["budget"], *report["figures"]["columns"]]:
        assert (run / path).is_file() and f"]({path})" in md
    manifest = json.loads((run / "manifest.json").read_text())
    assert {"report.html", report["figures"]["pairs"]} <= set(manifest["artifacts"])


def test_the_report_builder_takes_no_real_data():
    """Its inputs are the release's outputs: release, measurements, synthetic codes, schema, privacy.json."""
    inputs = ["release", "measurements", "synthetic", "schema", "privacy"]
    assert list(inspect.signature(dp_report).parameters) == inputs
    assert list(inspect.signature(write_public_figures).parameters) == ["report", "folder"]
    assert list(inspect.signature(render_html).parameters) == ["report", "figures", "root"]


def _rebuild(run: Path, out: Path) -> tuple[dict, str]:
    """The report from the run folder's public files alone, into ``out``."""
    release = Release.from_arrow(pq.read_table(run / "release.parquet"))
    from privsynth.run.releases import measurements_from_table

    measurements = measurements_from_table(pq.read_table(run / "measurements.parquet"))
    synthetic = encode_codes(pq.read_table(run / "synthetic.parquet").to_pandas(), SCHEMA)
    report = dp_report(release, measurements, synthetic, SCHEMA, json.loads((run / "privacy.json").read_text()))
    figures = write_public_figures(report, out / "figures")
    return report, render_html(report, figures, out)


def test_changing_a_real_row_after_the_release_changes_nothing_in_the_report(aim_run, tmp_path):
    run, frame = aim_run
    neighbour = frame.copy()
    neighbour.loc[0, ["colour", "size"]] = ["blue", 99]  # the real data changes; the release does not
    report, html = _rebuild(run, tmp_path)
    stored = json.loads((run / "report.json").read_text())
    stored.pop("figures")
    assert json.loads(json.dumps(report)) == stored
    again, html_again = _rebuild(run, tmp_path / "again")
    assert html == html_again
    for a, b in zip(sorted((tmp_path / "figures").iterdir()), sorted((tmp_path / "again" / "figures").iterdir())):
        assert a.read_bytes() == b.read_bytes()  # pictures: deterministic functions of the public report


def _png_text_chunks(data: bytes) -> list[bytes]:
    out, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind in (b"tEXt", b"iTXt"):
            out.append(body)
        elif kind == b"zTXt":
            out.append(zlib.decompress(body.split(b"\x00", 1)[1][1:]))
        pos += 12 + length
    return out


def test_no_public_file_embeds_a_real_data_value(aim_run):
    """The real row count and the real columns' proportions appear in no public file or picture."""
    run, frame = aim_run
    real = encode_codes(frame, SCHEMA)
    domain = domain_of(SCHEMA)
    secrets = {str(len(frame))}
    for a in range(domain.n_attributes):
        p = np.bincount(real[:, a], minlength=domain.sizes[a]) / len(frame)
        secrets |= {repr(float(x)) for x in p if 0 < x < 1 and len(repr(float(x))) >= 6}  # not "0.5": a bin edge
    texts = [(run / n).read_text() for n in ("report.json", "report.md", "report.html")]
    texts = [re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", t) for t in texts]  # pictures: their text below
    for png in (run / "figures").iterdir():
        texts += [c.decode("latin-1") for c in _png_text_chunks(png.read_bytes())]
    for text in texts:
        found = [s for s in secrets if re.search(rf"(?<![\d.]){re.escape(s)}(?!\d)", text)]
        assert not found, found


def test_prefect_report_artifact_is_built_from_the_public_report_only(aim_run):
    from flows.synthesize import report_markdown

    run, _ = aim_run
    report = json.loads((run / "report.json").read_text())
    md = report_markdown(report, "file:///runs/x/report.html")
    assert "file:///runs/x/report.html" in md and "INTERNAL" not in md
    assert list(inspect.signature(report_markdown).parameters) == ["report", "html_link"]


def test_a_release_without_measurements_says_so_for_every_marginal(tmp_path):
    release = privsynth.synthesize(toy_frame(200), SCHEMA, epsilon=1.0, seed=3, rows=100, unlimited=True,
                                   output=tmp_path / "run", ledger=f"sqlite:///{tmp_path / 'l.sqlite'}",
                                   release_store=tmp_path / "store", mechanism="reduced_space",
                                   options={"points_per_statistic": 2.0})
    run = Path(release.run_dir)
    report = json.loads((run / "report.json").read_text())
    assert all(e["status"] == "not measured" for e in report["columns"] + report["pairs"])
    assert "publishes no noisy measurements" in report["accuracy"]["applies"]
    assert (run / "report.html").is_file()
    assert "not measured: no accuracy statement" in render_report(report)


def test_column_labels_of_merged_levels_are_joined():
    from privsynth.report.dp_report import _level_labels

    assert _level_labels(("a", "b", "c"), (0, 1, 1)) == ["a", "b|c"]
    assert _level_labels(("a", "b"), None) == ["a", "b"]


def test_pictures_stay_one_image_for_many_columns(tmp_path):
    names = [f"c{i}" for i in range(54)]
    columns = [{"column": n, "status": "bound", "tv_bound": 0.1} for n in names]
    pairs = [{"columns": [a, b], "status": "bound" if i % 3 else "not measured", "tv_bound": 0.2}
             for i, (a, b) in enumerate(itertools.combinations(names, 2))]
    from privsynth.report.figures import pairs_heatmap

    path = pairs_heatmap(names, columns, pairs, tmp_path / "pairs.png")
    assert path.stat().st_size < 400_000


def test_prefect_artifacts_link_report_html_and_carry_no_audit(aim_run, monkeypatch):
    import flows.synthesize as flow
    from privsynth.run.results import AuditResult, PrivacyRecord, ReportResult, RoundingFacts
    from privsynth.run.stages import RunOutcome

    run, _ = aim_run
    report = json.loads((run / "report.json").read_text())
    published = []
    monkeypatch.setattr(flow, "create_markdown_artifact", lambda **kw: published.append(("markdown", kw)))
    monkeypatch.setattr(flow, "create_link_artifact", lambda **kw: published.append(("link", kw)))
    audit = {"visibility": "internal", "marginals": {"1": {"mean_tv": 0.123456789}}}
    outcome = RunOutcome("r", str(run), run, PrivacyRecord.of(json.loads((run / "privacy.json").read_text())),
                         RoundingFacts(300, True), ReportResult.of(report), AuditResult.of("internal", audit), None)
    flow.publish_report(outcome, "toy")
    (kind, md), (_, link) = published
    assert kind == "markdown" and link["link"] == (run / "report.html").resolve().as_uri()
    assert link["link"] in md["markdown"] and "0.123456789" not in json.dumps(published)
    for column in report["columns"]:
        assert column["column"] in md["markdown"]
    remote = RunOutcome("r", "s3://bucket/runs/r", run, outcome.privacy, outcome.rounding, outcome.report, None, None)
    assert flow._run_file(remote, "report.html") == "s3://bucket/runs/r/report.html"
