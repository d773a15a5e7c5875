"""Discovery inside the run (issue 27): a table with no schema, one command, a faithful release.

Every decision about a column (its type, whether it is whole numbers, an identifier, its codes, bounds
and categories) is DP or public; every synthetic value is one the column can hold.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SeededDraws, exact_facts

import privsynth
from privsynth.discovery import facts as F
from privsynth.discovery import points as P
from privsynth.discovery.forms import TENS
from privsynth.privacy.accounting import DEFAULT_DELTA
from privsynth.privacy.ledger import BudgetLedger
from privsynth.privacy.spending import rho_allowance

N = 4000


def survey(n: int = N, seed: int = 0) -> pd.DataFrame:
    """A warehouse-like table: integer codes stored as floats with missing values, a rare 0/1 outcome, a
    heavy-tailed amount with many zeros, an identifier, text, a date."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "uid": np.arange(n) + 10_000,
        "bracket": rng.integers(1, 13, n).astype(float),
        "answer": rng.choice([1, 2, 3, 4, 5, 7, 9], n, p=[.2, .2, .2, .2, .1, .05, .05]).astype(float),
        "outcome": rng.choice([0.0, 1.0], n, p=[.9, .1]),
        "amount": np.where(rng.random(n) < 0.5, 0.0, np.round(rng.lognormal(7, 1.5, n), 2)),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "visited": (pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 700, n),
                                                                 unit="D")).strftime("%Y-%m-%d"),
    })
    frame.loc[rng.random(n) < 0.05, "bracket"] = np.nan
    frame.loc[rng.random(n) < 0.03, "outcome"] = np.nan
    return frame


def _facts(classes, distinct, sigma=1.0) -> F.NoisyFacts:
    return F.NoisyFacts("c", tuple(float(x) for x in classes), float(distinct), sigma, sigma)


# ---------------------------------------------------------------- DP column facts: pure decisions

@pytest.mark.parametrize("classes, distinct, declared, kind", [
    ((50, 950, 0, 0, 0, 0), 12, "float", "integer"),        # codes stored as floats with missing values
    ((0, 500, 500, 0, 0, 0), 900, "float", "float"),
    ((0, 990, 0, 0, 0, 10), 40, "text", "integer"),         # a few "unknown" among numbers: numeric
    ((0, 0, 0, 0, 0, 1000), 3, "text", "categorical"),
    ((0, 0, 0, 1000, 0, 0), 300, "text", "date"),
    ((0, 0, 0, 10, 990, 0), 900, "text", "timestamp"),
    ((0, 1000, 0, 0, 0, 0), 1000, "integer", "integer"),    # one whole number per row: a measure (keys by name)
    ((0, 0, 0, 0, 0, 1000), 998, "text", None),             # free text or an identifier
    ((995, 1, 0, 0, 0, 4), 2, "text", "categorical"),       # too little present to decide: kept as text
])
def test_facts_decide_the_type_from_noisy_counts(classes, distinct, declared, kind):
    assert F.decide(_facts(classes, distinct), declared).kind == kind


def test_facts_have_sensitivity_one_on_neighbouring_tables():
    frame = survey(300).astype({"bracket": object})
    for extra in ({"bracket": "30.5"}, {"bracket": "unknown"}, {"bracket": None}, {"region": "  "},
                  {"bracket": "1,234.5"}, {"region": "03/04/2021"}, {"region": "12.5%"}, {"bracket": "02134"},
                  {"region": "2021-03-04T05:00:00Z"}, {"region": "2021/03/04 05:06:07"},
                  {"region": "9/30/1990 0:00:00"}, {"region": "13/1/2021 5:30"}, {"region": "2/30/2021 0:00:00"}):
        neighbour = pd.concat([frame, pd.DataFrame([{**frame.iloc[0].to_dict(), **extra}])], ignore_index=True)
        columns = [(c, "text") for c in frame.columns]
        counts = [exact_facts(table, columns) for table in (frame.astype(str).replace({"nan": ""}),
                                                              neighbour.astype(str).replace({"nan": "", "None": ""}))]
        for name, _ in columns:
            a, b = counts[0][name], counts[1][name]
            # one row: one class, by one; at most one decimals bin, by one
            assert np.abs(b.classes - a.classes).sum() == 1 and np.linalg.norm(b.classes - a.classes) == 1
            assert np.abs(b.decimals - a.decimals).sum() <= 1
            assert 0 <= b.distinct - a.distinct <= 1


def test_a_stored_number_s_places_have_sensitivity_one_on_neighbouring_tables():
    """The places slots of stored integers (remainders) and doubles (floors) move by at most one count when one row
    is added, whatever it holds: a zero, a whole thousand, a value past 2^53, an infinity or a NaN."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"whole": pd.array(10 * rng.integers(0, 37, 200), dtype="Int64"),
                          "real": np.round(rng.uniform(0, 50, 200), 2)})
    columns = [("whole", "integer"), ("real", "float")]
    for extra in ({"whole": 0}, {"whole": 3000}, {"whole": 7}, {"whole": 2 ** 60}, {"whole": None},
                  {"real": 0.0}, {"real": 1e300}, {"real": float("inf")}, {"real": float("nan")},
                  {"real": 6.904679999999999}, {"real": 2.5e6 + 0.5}, {"real": 4000.0}):
        neighbour = pd.concat([frame, pd.DataFrame([{**frame.iloc[0].to_dict(), **extra}]).astype(frame.dtypes)],
                              ignore_index=True)
        counts = [exact_facts(table, columns) for table in (frame, neighbour)]
        for name, _ in columns:
            a, b = counts[0][name], counts[1][name]
            assert np.abs(b.decimals - a.decimals).sum() <= 1, (extra, name, a.decimals, b.decimals)


def test_one_added_row_no_longer_decides_a_published_type(tmp_path):
    """Attack (privacy review round 3, item 2): a sniffer read `age` as integer, and with one extra "30.5" as
    float, with certainty. Without --epsilon nothing is read (the file is identical); with it the type comes
    from noisy counts."""
    base = pd.DataFrame({"age": np.arange(2000) % 70 + 18, "g": ["a", "b"] * 1000})
    neighbour = pd.concat([base.astype({"age": object}), pd.DataFrame([{"age": "30.5", "g": "a"}])])
    texts = {}
    for name, frame in (("d", base), ("d1", neighbour)):
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        free = privsynth.discovery.draft_schema(str(path), privsynth.discovery.DraftOptions(name="t")).text
        paid = privsynth.discovery.draft_schema(str(path), privsynth.discovery.DraftOptions(
            name="t", epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}", require_budget=False, seed=3)).text
        texts[name] = (free.replace(str(path), "P"), yaml.safe_load(paid))
    assert texts["d"][0] == texts["d1"][0]
    # Paid: the type is read from noisy counts (sensitivity 1, test above), so the extra row moves it only
    # with the small probability the noise allows; both outcomes are types the column can take.
    assert texts["d"][1]["columns"][0]["type"] == "integer"
    assert texts["d1"][1]["columns"][0]["type"] in ("integer", "float")


# ---------------------------------------------------------------- the run without a schema

@pytest.fixture
def released(tmp_path, monkeypatch):
    """One no-schema run with its noise fixed (a fixed ledger secret, run id and seed key every draw), so the
    checks below meet one known draw, not a fresh one each run (a rare code can miss its threshold)."""
    from conftest import PINNED_RUN_ID, pinned_ledger

    frame = survey()
    path = tmp_path / "survey.csv"
    frame.to_csv(path, index=False, encoding="utf-8-sig")  # a spreadsheet export's byte-order mark
    ledger = pinned_ledger(tmp_path / "ledger.sqlite")
    monkeypatch.setattr("privsynth.run.prepare.new_run_id", lambda: PINNED_RUN_ID)
    release = privsynth.synthesize(str(path), epsilon=2.0, ledger=ledger, unlimited=True, seed=1,
                                   output=tmp_path / "run", release_store=tmp_path / "store")
    return frame, release, ledger


def test_no_schema_run_discovers_a_faithful_domain(released):
    frame, release, _ = released
    schema = yaml.safe_load((release.run_dir / "schema.yaml").read_text())
    cols = {c["name"]: c for c in schema["columns"]}
    assert cols["uid"].get("drop") is True
    assert cols["bracket"]["type"] == "integer" and cols["bracket"]["values"] == list(range(1, 13))
    assert cols["answer"]["values"] == [1, 2, 3, 4, 5, 7, 9]  # codes with gaps, kept exactly
    assert cols["outcome"]["values"] == [0, 1]
    assert cols["amount"]["type"] == "float" and cols["amount"]["bounds"][1] >= np.quantile(frame.amount, 0.95)
    assert sorted(cols["region"]["categories"]) == ["east", "north", "south", "west"]
    assert cols["visited"]["type"] == "date"
    assert "dp_released" in cols["bracket"] and "type" in cols["bracket"]["dp_released"]


def test_every_synthetic_value_is_one_the_column_can_hold(released):
    frame, release, _ = released
    synthetic = release.to_pandas()
    assert "uid" not in synthetic.columns and len(synthetic) > 0.8 * N
    for column in ("bracket", "answer", "outcome"):
        values = set(synthetic[column].dropna().astype(float))
        assert values <= set(frame[column].dropna()), column  # integer codes only, never 2.04
    assert synthetic["amount"].min() >= 0 and (synthetic["amount"] == 0).mean() > 0.3  # zeros stay zeros
    schema = yaml.safe_load((release.run_dir / "schema.yaml").read_text())
    low, high = next(c for c in schema["columns"] if c["name"] == "amount")["bounds"]
    assert synthetic["amount"].dropna().between(low, high).all()
    assert set(synthetic["region"].dropna()) <= {"north", "south", "east", "west", "<out-of-domain>"}


def test_discovery_is_charged_inside_the_run_budget(released):
    _, release, ledger = released
    total = rho_allowance(2.0, DEFAULT_DELTA * (1 - 0.1))
    run_total = release.privacy["run_total"]
    assert run_total["cost"]["rho_zcdp"] == pytest.approx(total, rel=1e-6)
    assert run_total["cost"]["epsilon_at_delta"] <= 2.0 + 1e-9
    parts = run_total["parts"]
    assert parts["discovery_rho"] > 0 and parts["discovery_rho"] + parts["mechanism_rho"] == pytest.approx(total,
                                                                                                           rel=1e-6)
    with BudgetLedger(ledger) as book:
        charged = sum(record.cost().rho for record in book.history("survey"))
    assert charged == pytest.approx(total, rel=1e-6)
    discovery = json.loads((release.run_dir / "discovery.json").read_text())
    assert discovery["visibility"] == "public (DP)" and "uid" in discovery["dropped"]


def test_discoverys_category_counts_are_measurements_the_mechanism_joins(released):
    """Issue 37.2: the discover stage's noisy category counts (DP, recorded in discovery.json) are joined with
    aim's own 1-way measurements; the run's cost is the same (checked above) and the counts are noisy."""
    frame, release, _ = released
    discovery = json.loads((release.run_dir / "discovery.json").read_text())
    counts = discovery["category_counts_dp"]["region"]
    truth = frame["region"].value_counts()
    assert set(counts) == {"north", "south", "east", "west"}
    for value, (count, sigma) in counts.items():
        assert count != truth[value] and abs(count - truth[value]) < 6 * sigma and sigma > 1
    assert release.privacy["release_facts"]["earlier_counts_joined"] == {"region": 4}


def test_the_discovered_schema_is_reused_at_no_new_cost(released, tmp_path):
    frame, release, ledger = released
    path = tmp_path / "again.parquet"
    frame.to_parquet(path)
    again = privsynth.synthesize(str(path), release.run_dir / "schema.yaml", epsilon=0.5, ledger=ledger,
                                 dataset="survey", unlimited=True, seed=2, output=tmp_path / "run2",
                                 release_store=tmp_path / "store")
    assert "run_total" not in again.privacy and again.privacy["cost"]["epsilon_at_delta"] <= 0.5 + 1e-9


def test_a_two_column_table_runs_with_the_default_mechanism(tmp_path):
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"kind": rng.choice(["a", "b", "c"], 3000), "score": rng.integers(0, 5, 3000)})
    release = privsynth.synthesize(frame, epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.sqlite'}", unlimited=True,
                                   seed=0, output=tmp_path / "run", release_store=tmp_path / "store")
    assert release.privacy["config"]["k"] == 2 and set(release.to_pandas()["score"].dropna()) <= set(range(5))


@pytest.mark.parametrize("mechanism", ["microaggregation", "reduced_space"])
def test_a_pure_dp_mechanism_after_discovery_stays_inside_the_budget(tmp_path, mechanism):
    """Discovery is zCDP, these mechanisms pure eps-DP: the mechanism gets eps = sqrt(2 rho_left), so that
    rho adds up to the run's allowance; a budget of exactly the run's epsilon accepts both charges."""
    rng = np.random.default_rng(6)
    frame = pd.DataFrame({"kind": rng.choice(["a", "b"], 4000), "score": rng.integers(0, 3, 4000)})
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    with BudgetLedger(ledger) as book:
        book.set_budget("t", epsilon=1.0, delta=DEFAULT_DELTA)
    release = privsynth.synthesize(frame, epsilon=1.0, mechanism=mechanism, ledger=ledger, dataset="t",
                                   output=tmp_path / "run", release_store=tmp_path / "store")
    parts = release.privacy["run_total"]["parts"]
    total = rho_allowance(1.0, DEFAULT_DELTA * (1 - 0.1))
    assert parts["discovery_rho"] + parts["mechanism_rho"] == pytest.approx(total, rel=1e-6)
    assert release.privacy["cost"]["pure_epsilon"] == pytest.approx(math.sqrt(2 * parts["mechanism_rho"]), rel=1e-6)
    assert release.privacy["run_total"]["cost"]["epsilon_at_delta"] <= 1.0 + 1e-9


def test_the_dp_report_states_what_discovery_spent_and_dropped(released):
    _, release, _ = released
    report = json.loads((release.run_dir / "report.json").read_text())
    stages = {s["stage"]: s["rho"] for s in report["budget"]["stages"]}
    parts = release.privacy["run_total"]["parts"]
    assert stages["discover"] == pytest.approx(parts["discovery_rho"]) and stages["mechanism"] > 0
    assert report["budget"]["total_rho"] == pytest.approx(parts["discovery_rho"] + parts["mechanism_rho"])
    assert "uid" in report["discovery"]["dropped"]
    assert all(o["share"] >= 0.01 for o in report["discovery"]["out_of_domain"])
    assert "## The discovered schema" in (release.run_dir / "report.md").read_text()


def test_a_unique_column_is_an_identifier_whatever_the_noise_of_its_present_count():
    """The present count sums fourteen noisy classes; a nearly-unique column's distinct/present ratio must not
    pass its 0.9 bar by that noise (a CI run kept a unique `uid` about one run in fifty)."""
    rng = np.random.default_rng(5)
    sigma, n, kept, repeated_dropped = 60.9, 4000.0, 0, 0
    for _ in range(3000):
        exact = np.zeros(len(F.CLASSES))
        exact[F.CLASSES.index("whole")] = n
        classes = exact + rng.normal(0, sigma, len(exact))
        unique = F.NoisyFacts("uid", tuple(classes), n + rng.normal(0, sigma), sigma, sigma)
        kept += not F.nearly_unique(unique)
        repeated = dataclasses.replace(unique, distinct=0.7 * n + rng.normal(0, sigma))
        repeated_dropped += F.nearly_unique(repeated)
    assert kept == 0 and repeated_dropped == 0


@pytest.mark.parametrize("written, kind, form", [("date", "date", None), ("whole", "integer", None),
                                                 ("thousands", "integer", "thousands"), ("fraction", "float", None),
                                                 ("timestamp", "timestamp", None)])
def test_a_column_of_one_written_form_keeps_its_kind_over_many_draws(written, kind, form):
    """15,402 ISO dates at a 28-column table's facts rho (noise 183 a class) read as text in about one draw of
    550: the other classes' summed noise passed three deviations, and every value of the column came back as
    `<out-of-domain>`. "1,234" read as a float in one draw of 60 (five decimals slots' positive noise summed).
    The tests of "the rest is noise" now stand at four deviations, as a single class does. A plain number column
    got a "$", a "%" or separators in one draw of 250 (a format class's noise past three deviations), and one
    class of a dozen standing out by noise made it text: any of several classes now stands out at the false-alarm
    rate of one at four deviations."""
    classes = np.zeros(len(F.CLASSES))
    classes[F.CLASSES.index(written)] = 15_402.0
    places = np.zeros(F.PLACES)
    places[TENS + (2 if written == "fraction" else 0)] = 15_402.0  # whole units, or two decimals
    exact = F.ExactFacts(classes, 426.0, places)
    decided = [F.decide(F.release("c", exact, 3.721e-5, SeededDraws(s)), "text") for s in range(3_000)]
    assert [d.kind for d in decided].count(kind) == len(decided)
    assert [d.value_format for d in decided].count(form) == len(decided)


def test_nearly_unique_whole_numbers_are_a_measure_and_nearly_unique_text_is_dropped():
    """Issue 37.4: a whole number per row (a team's attendance, a county's votes) was dropped as an identifier
    by its DP facts, and a documented column went missing from the release. Whole numbers are kept and say why;
    text of one value per row is still free text or a key, dropped; a numeric key goes by its name."""
    whole = np.zeros(len(F.CLASSES))
    whole[F.CLASSES.index("whole")] = 2784
    for declared in ("integer", "float", "text"):
        decided = F.decide(F.NoisyFacts("home_attendance", tuple(whole), 2700.0, 30.0, 30.0), declared)
        assert decided.kind == "integer" and "kept as a measure" in decided.reason
    text = np.zeros(len(F.CLASSES))
    text[F.CLASSES.index("text")] = 2784
    assert F.decide(F.NoisyFacts("comment", tuple(text), 2700.0, 30.0, 30.0), "text").kind is None
    assert F.decide(F.NoisyFacts("home_attendance", tuple(whole), 900.0, 30.0, 30.0), "integer").reason \
        .count("measure") == 0


def test_a_column_the_budget_cannot_map_is_kept_never_dropped(tmp_path):
    """Issue 37.4: at a budget too small to find a column's categories or bounds, the column stays in the
    release with what was found: a categorical of <out-of-domain> values (its missing share kept), a number
    column with coarse bounds, never an empty categorical."""
    rng = np.random.default_rng(0)
    n = 600
    frame = pd.DataFrame({"shop": [f"s{i % 200:03d}x" for i in range(n)], "g": rng.choice(["a", "b"], n),
                          "age": rng.integers(18, 80, n)})
    frame.loc[:59, "shop"] = None
    release = privsynth.synthesize(frame, epsilon=0.5, ledger=f"sqlite:///{tmp_path / 'l.db'}", unlimited=True,
                                   seed=2, output=tmp_path / "run", release_store=tmp_path / "store")
    schema = {c["name"]: c for c in yaml.safe_load((release.run_dir / "schema.yaml").read_text())["columns"]}
    assert not any(c.get("drop") for c in schema.values())
    assert schema["shop"]["type"] == "categorical" and schema["shop"]["categories"] == []
    assert schema["age"]["type"] in ("integer", "float")
    synthetic = release.to_pandas()
    assert list(synthetic.columns) == ["shop", "g", "age"]
    assert set(synthetic["shop"].dropna()) <= {"<out-of-domain>"}
    low, high = schema["age"]["bounds"]
    assert synthetic["age"].dropna().between(low, high).all()


def test_the_draft_says_before_reading_what_its_budget_can_find(tmp_path):
    """Issue 37.1: the stated category threshold (public arithmetic, before any row is read) is the one the
    release then applies."""
    import re

    rng = np.random.default_rng(0)
    pd.DataFrame({"g": rng.choice(["a", "b"], 3000), "x": rng.integers(0, 9, 3000)}).to_csv(tmp_path / "t.csv",
                                                                                          index=False)
    text = privsynth.discovery.draft_schema(str(tmp_path / "t.csv"), privsynth.discovery.DraftOptions(
        name="t", epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}", require_budget=False, seed=1)).text
    stated = re.search(r"# At this budget, .* fewer than about ([\d,]+) rows is lost .* about ([\d,]+) rows when "
                       "every column is short alike", text)
    applied = re.search(r"passed the threshold \(([\d,]+) rows at this budget\)", text)
    assert stated and applied
    first, pooled, used = (float(x.replace(",", "")) for x in (*stated.groups(), applied.group(1)))
    # its first look's threshold, or, where that look left values unfound, one at most the pooled figure
    assert used == first or used <= pooled < first


def test_a_narrow_range_far_from_zero_gets_bins_that_fit_it(tmp_path):
    """Issue 35.3: a latitude 44.88-45.06 lies in one cell of the octave [32, 64)'s grid; round 2 zooms a
    public grid onto the span its first half of the rho found, so its bins fit the data."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"lat": np.round(rng.uniform(44.88, 45.06, 20_000), 5),
                          "long": np.round(rng.normal(-93.26, 0.03, 20_000), 5)})
    frame.to_csv(tmp_path / "stops.csv", index=False)
    text = privsynth.discovery.draft_schema(str(tmp_path / "stops.csv"), privsynth.discovery.DraftOptions(
        name="stops", epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}", require_budget=False, seed=4)).text
    columns = {c["name"]: c for c in yaml.safe_load(text)["columns"]}
    low, high = columns["lat"]["bounds"]
    assert 44.5 <= low <= 44.88 and 45.06 <= high <= 45.5
    inner = [e for e in columns["lat"]["bins"] if 44.88 < e < 45.06]
    assert len(inner) >= 4  # the quantile edges land inside the data, not one 0.25-wide cell around it
    low, high = columns["long"]["bounds"]
    assert -94.0 <= low <= frame["long"].quantile(0.01) and frame["long"].quantile(0.99) <= high <= -92.5
    # The octave's grid puts the longitude in a span 3.5 wide, where the zoomed grid's cells (0.027) still
    # hold its middle 90% in 4 cells: a second zoom places the quantile edges inside it (one zoom left 3).
    middle = frame["long"].quantile([0.05, 0.95]).tolist()
    assert sum(middle[0] < e < middle[1] for e in columns["long"]["bins"]) >= 6


def test_a_small_table_never_zooms_onto_noise():
    """A 2,930-row latitude (41.99-42.06, the octave [32, 64)) at the rho a 74-column table gives one column: the
    zoomed grid's cells hold about 500 rows under noise of about 400, and a second zoom onto what they showed
    (a lone noise excursion) kept 2% of the rows in seed 0. What a zoomed grid shows narrows the span only where
    it could not leave out more than LOSS_SHARE of the rows unseen: no run keeps less than the cells the first
    zoom's read-out keeps (82% here, where the next cell's 18% hides in the noise)."""
    from privsynth.discovery import bounds as B
    from privsynth.discovery import zoom as Z

    rng = np.random.default_rng(7)
    raw = np.round(np.clip(rng.normal(42.03, 0.018, 2_930), 41.9865, 42.0634), 6)
    values, counts = np.unique(raw, return_counts=True)
    bounds = B.Bounds(32.0, 64.0, (32.0, 64.0))
    edges = B.fine_edges(bounds.low, bounds.high, False)
    for seed in range(20):
        noise = SeededDraws(seed)
        _, fine = Z.measure_and_read(values, counts.astype(float), edges, 2.8e-5, noise, bounds, False, False, 8,
                                     public=False, numeric=True)
        assert ((raw >= fine.low) & (raw <= fine.high)).mean() >= 0.8, (seed, fine.low, fine.high)


@pytest.mark.parametrize("zoomed", [False, True])
def test_round_two_spends_its_rho_once_whether_it_zooms_or_not(zoomed):
    """Round 2 spends its rho in MAX_ZOOMS + 1 equal parts, each at L levels: zoomed or not, the parts' rho sum
    to the rho it was given, and a read-out without a zoom is one measurement at the whole rho."""
    from privsynth.discovery import bounds as B
    from privsynth.discovery import zoom as Z

    spent: list[float] = []

    class Meter:
        def add_gaussian(self, x, sigma, *, sensitivity=None):
            spent.append(sensitivity ** 2 / (2.0 * sigma ** 2))
            return np.asarray(x, dtype=float)

    rng = np.random.default_rng(0)
    raw = rng.normal(-93.26, 0.03, 5_000) if zoomed else rng.uniform(-128.0, -64.0, 5_000)
    values, counts = np.unique(np.round(raw, 4), return_counts=True)
    bounds = B.Bounds(-128.0, -64.0, (-128.0, -64.0))
    edges = B.fine_edges(bounds.low, bounds.high, False)
    levels, fine = Z.measure_and_read(values, counts.astype(float), edges, 0.3, Meter(), bounds, False, False, 8,
                                      public=False, numeric=True)
    assert sum(spent) == pytest.approx(0.3)
    assert levels[0].edges[0] == pytest.approx(-128.0) and levels[0].edges[-1] == pytest.approx(-64.0)
    if zoomed:
        assert -93.5 < fine.low and fine.high < -93.0
    else:
        whole = B.measure_levels(values, counts.astype(float), edges, 0.3, Meter())
        assert [lv.sigma for lv in levels] == pytest.approx([lv.sigma for lv in whole])


def test_two_half_measurements_averaged_are_one_at_the_whole_rho():
    from privsynth.discovery import bounds as B
    from privsynth.discovery import zoom as Z

    class Zero:
        def add_gaussian(self, x, sigma, *, sensitivity=None):
            return np.asarray(x, dtype=float)

    edges = B.fine_edges(0.0, 100.0, False)
    values, counts = np.array([10.0, 50.0]), np.array([5.0, 7.0])
    whole = B.measure_levels(values, counts, edges, 0.2, Zero())
    halves = Z.averaged(B.measure_levels(values, counts, edges, 0.1, Zero()),
                        B.measure_levels(values, counts, edges, 0.1, Zero()))
    for a, b in zip(whole, halves):
        assert a.sigma == pytest.approx(b.sigma) and np.array_equal(a.noisy, b.noisy)


def test_the_zeros_cell_grows_no_tail_into_tiny_values_of_the_other_sign():
    """A column of zeros and positives: a noisy count in [-2^-31, -2^-32) is no tail of its zeros; grown into,
    it made the bounds -4.7e-10 and the zeros were written as tiny negatives (movies r4, 30% wrong values)."""
    from privsynth.discovery import bounds as B

    edges = B.log_edges()
    z = int(np.searchsorted(edges, -B.ZERO_CELL))
    noisy = np.zeros(len(edges) - 1)
    noisy[z], noisy[z - 1], noisy[z + 40], noisy[z + 41] = 1000.0, 50.0, 500.0, 50.0
    low, high = B.extend_into_tails(noisy, edges, 10.0, float(edges[z]), float(edges[z + 41]))
    assert low == -B.ZERO_CELL and high == float(edges[z + 42])  # the positive tail still grows


def test_inconclusive_text_facts_never_turn_text_into_dates_or_numbers_on_noise():
    """A text column with 106 present values of 2,930 (a house table's "Shed", "Gar2") at a 74-column table's
    facts rho: its facts are inconclusive, and noise alone used to make it a timestamp column in about one run
    in six. It stays categorical; a column of numbers written as text whose numbers stand KIND_SIGMAS out (4,000 of
    them, inconclusive at this rho in most runs) is read as numbers."""
    from privsynth.discovery import facts as F

    def exact(**counts):
        classes = np.zeros(len(F.CLASSES))
        for name, count in counts.items():
            classes[F.CLASSES.index(name)] = count
        return F.ExactFacts(classes, 5.0, np.zeros(F.PLACES))

    text = exact(missing=2_824, text=106)
    kinds = [F.decide(F.release("misc", text, 1.4e-5, SeededDraws(s)), "text").kind for s in range(300)]
    assert set(kinds) == {"categorical"}
    numbers = exact(missing=500, whole=4_000)
    decided = [F.decide(F.release("n", numbers, 1.4e-5, SeededDraws(s)), "text") for s in range(50)]
    assert sum("too noisy" in d.reason for d in decided) >= 40 and all(d.kind == "integer" for d in decided)


def test_labels_beside_numbers_keep_a_column_categorical():
    """Sleep hours written 5 to 9, "<5" and "10+" (10% of 12,335 present values) at a 13-column table's facts rho:
    the non-number classes summed to less than the noise of a dozen classes, so the column was read as numbers
    and both labels became missing. A class standing out of its own noise keeps it text; a few junk values
    (0.2%) do not."""
    from privsynth.discovery import facts as F

    def exact(**counts):
        classes = np.zeros(len(F.CLASSES))
        for name, count in counts.items():
            classes[F.CLASSES.index(name)] = count
        return F.ExactFacts(classes, 7.0, np.r_[np.zeros(F.TENS), 11_054.0, np.zeros(F.PLACES - F.TENS - 1)])

    labelled = exact(missing=1_248, whole=11_054, text=1_281)
    junk = exact(missing=1_248, whole=12_310, text=25)
    for seed in range(100):
        assert F.decide(F.release("sleep", labelled, 8.015e-5, SeededDraws(seed)), "text").kind == "categorical"
        assert F.decide(F.release("sleep", junk, 8.015e-5, SeededDraws(seed)), "text").kind == "integer"


def test_a_typed_float_keeps_its_decimals_where_its_class_counts_are_inconclusive():
    """A 50-column table of 5,698 rows (station ridership written with 3 decimals): at its facts' rho the class counts
    fell under the evidence bar one run in ten and the column came back with 15 digits after the point. The
    decimals have a histogram of their own, and it decides the precision whether or not the classes do."""
    from privsynth.discovery import facts as F

    classes = np.zeros(len(F.CLASSES))
    classes[F.CLASSES.index("fraction")] = 5_560
    classes[F.CLASSES.index("whole")] = 138
    places = np.array([0.0, 0.0, 0.0, 138.0, 60.0, 478.0, 5_015.0, 7.0, 0.0, 0.0])
    exact = F.ExactFacts(classes, 3_000.0, places)
    decided = [F.decide(F.release("Polk", exact, 2.084e-5, SeededDraws(s)), "float") for s in range(200)]
    assert all(d.kind == "float" for d in decided) and sum(d.precision == 3 for d in decided) >= 0.9 * len(decided)
    # 40% of the rows: near the evidence bar of a stored number's two classes (1,732 at this noise)
    few = F.ExactFacts(classes * 0.4, 1_200.0, places * 0.4)
    decided = [F.decide(F.release("Polk", few, 2.084e-5, SeededDraws(s)), "float") for s in range(200)]
    inconclusive = [d for d in decided if "too noisy" in d.reason]
    assert len(inconclusive) >= 5 and all(d.kind == "float" for d in decided)
    assert sum(d.precision == 3 for d in inconclusive) >= 0.9 * len(inconclusive)


def test_a_declared_integer_column_stays_integer_whatever_the_noise():
    """The source's declared type is public: an int64 column holds no fraction, so its noisy fraction count (noise
    alone) never makes it a float column whose values would be written with decimals (about one run in 3,000
    per column did: a visit count came back as 2.37 visits)."""
    from privsynth.discovery import facts as F

    classes = np.zeros(len(F.CLASSES))
    classes[F.CLASSES.index("whole")] = 4_406
    exact = F.ExactFacts(classes, 60.0, np.r_[np.zeros(F.TENS), 4_406.0, np.zeros(F.PLACES - F.TENS - 1)])
    kinds = {F.decide(F.release("visits", exact, 5.5e-5, SeededDraws(s)), "integer").kind
             for s in range(3_000)}
    assert kinds == {"integer"}


def test_round_one_bounds_skip_a_false_cell_far_from_the_data_but_keep_a_real_cluster_apart():
    """4,000 scores between 0 and 49 at a 3-column draft's rho (sigma 8.2): an empty octave passes the usual bar
    (4.4 deviations on 194 octaves) in 0.1% of read-outs, and one at 2^62 took the bounds to 4.6e18. A cluster
    apart from the fullest cell's stands only when it holds a share of the rows or passes a stricter bar; a
    sentinel of 200 rows at 99,999 does, and so does the zeros' cell beside positive values."""
    from privsynth.discovery import bounds as B

    edges = B.log_edges()
    values, counts = np.arange(50.0), np.full(50, 80.0)
    far = int(np.searchsorted(edges, 2.0 ** 62, side="right")) - 1
    for seed in range(20):
        noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), 0.007442, SeededDraws(seed))
        noisy[far] = 4.6 * sigma  # passes the usual bar, not the stricter one; 1% of the rows
        found = B.coarse_bounds(noisy, sigma, edges, integer=True)
        assert found is not None and found.low == 0.0 and 64.0 <= found.high <= 128.0, (seed, found)
        sentinel = np.append(values, 99_999.0), np.append(counts, 200.0)
        noisy, sigma = B.noisy_cells(B.cell_counts(*sentinel, edges), 0.007442, SeededDraws(seed))
        assert B.coarse_bounds(noisy, sigma, edges, integer=True).high == 131_072.0, seed
        positive = np.arange(1.0, 50.0), np.full(49, 80.0)
        zeros = np.append(0.0, positive[0]), np.append(60.0, positive[1])  # 60 zeros: 1.5% of the rows
        noisy, sigma = B.noisy_cells(B.cell_counts(*zeros, edges), 0.007442, SeededDraws(seed))
        assert B.coarse_bounds(noisy, sigma, edges, integer=True).low == 0.0, seed


def test_round_one_bounds_skip_a_false_cell_far_from_a_count_at_a_wide_tables_noise():
    """A count of basement bathrooms in 2,930 houses (0, 1, 2, 3) at a 74-column table's rho (sigma 133): a
    false cell at 2^47 passing the usual bar holds a fifth of the rows, as much as a real cluster; far from the
    data it must pass the stricter bar too. The integer octaves between 0 and 1 are no gap: 1 is beside 0."""
    from privsynth.discovery import bounds as B

    edges = B.log_edges()
    values, counts = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1_707.0, 1_181.0, 23.0, 2.0])
    far = int(np.searchsorted(edges, 2.0 ** 47, side="right")) - 1
    for seed in range(20):
        noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), 2.816e-5, SeededDraws(seed))
        noisy[far] = 4.8 * sigma
        found = B.coarse_bounds(noisy, sigma, edges, integer=True)
        assert found is not None and found.low == 0.0 and 2.0 <= found.high <= 8.0, (seed, found)


def test_a_trim_keeps_a_cell_that_shows_data_though_an_empty_cell_beyond_dilutes_it():
    """Year built, 2,930 houses, cells of 64 years under noise 266.5: [1984, 2048) holds 40% of the houses (877
    noisy), and the grid's last cell [2048, 2049) is empty (-137). Their running total (740) stayed under three
    deviations of two cells (1,131), so the trim cut both and clipped 40% of the column at 1984. A cell whose own
    count shows three deviations is data."""
    from privsynth.discovery import bounds as B

    edges = np.append(np.arange(1024.0, 2049.0, 64.0), 2049.0)
    noisy = np.array([-60, 40, -120, 90, 10, -30, 70, -100, 20, 55, -138, 10, 30, 468, 1556, 877, -137], dtype=float)
    level = B.Level(64, edges, noisy, 266.5)
    assert B.trim_empty_ends(level, 1024.0, 2048.0, True, B.TRIM_SIGMAS)[1] == 2048.0
    quiet = B.Level(64, edges, np.where(np.arange(17) == 15, 700.0, noisy), 266.5)  # under 3 deviations: cut
    assert B.trim_empty_ends(quiet, 1024.0, 2048.0, True, B.TRIM_SIGMAS)[1] == 1984.0


def test_zeros_that_round_one_counted_are_a_point_of_the_bins():
    """A second floor's area (57% zeros, the rest in [128, 2048)) at a 74-column table's rho: round 2's grids
    are mostly noise there, and a quantile bin [0, 79) decoded its zeros as whole numbers 0-4 drawn uniformly
    (12% zeros). Round 1's zeros' cell, already paid for, makes 0 a bin of its own, written exactly."""
    from privsynth.discovery.column_release import round_one_bounds, round_two_edges
    from privsynth.discovery.declared import DeclaredColumn
    from privsynth.discovery.draft import ColumnDraft

    rng = np.random.default_rng(3)
    raw = np.concatenate([np.zeros(1_678), rng.integers(128, 256, 19), rng.integers(256, 512, 148),
                          rng.integers(512, 1024, 866), rng.integers(1024, 2048, 219)]).astype(float)
    values, counts = np.unique(raw, return_counts=True)
    for seed in range(10):
        d = ColumnDraft(DeclaredColumn("second_floor", "integer", "INTEGER", True), {}, [])
        noise = SeededDraws(seed)
        found = round_one_bounds(d, values, counts, 2.816e-5, noise)
        round_two_edges(d, values, counts, 2.816e-5, found, 8, noise, public=False)
        assert d.entry["bins"][:2] == [0, 1], (seed, d.entry["bins"])
    assert P.zero_point((np.array([-1.0, 1.0, 2.0]), np.array([50.0, 10.0]), 1.0), 1_000.0) == (0.0,)
    assert P.zero_point((np.array([-1.0, 1.0, 2.0]), np.array([15.0, 1_000.0]), 1.0), 1_000.0) == ()  # < 2%
    assert P.zero_point((np.array([1.0, 2.0, 3.0]), np.array([50.0, 10.0]), 1.0), 60.0) == ()  # no zeros' cell


def test_whole_tens_are_read_as_codes_on_a_grid_of_tens():
    """Wind directions in whole tens (0 to 360, 26,115 readings) at a 15-column table's round-2 rho: on a grid of one
    cell per integer their 37 values passed the codes' bar in no run, and quantile bins drew 231 and 247. With the
    precision the facts decided (-1: whole tens), round 2's grid has a cell per ten, and the column is coded in most
    runs: its values exactly (a value the bar and its neighbours missed is written as the code below it). The same
    column without that precision keeps its bins."""
    from privsynth.discovery.column_release import round_one_bounds, round_two_edges
    from privsynth.discovery.declared import DeclaredColumn
    from privsynth.discovery.draft import ColumnDraft

    rng = np.random.default_rng(5)
    weights = rng.uniform(0.2, 1.0, 37)
    raw = 10.0 * rng.choice(37, 26_115, p=weights / weights.sum())
    values, counts = np.unique(raw, return_counts=True)
    coded_runs = 0
    for seed in range(12):
        for entry in ({"precision": -1}, {}):
            d = ColumnDraft(DeclaredColumn("wind_dir", "integer", "BIGINT", True), dict(entry), [])
            noise = SeededDraws(seed)
            found = round_one_bounds(d, values, counts, 1.389e-4, noise)
            round_two_edges(d, values, counts, 1.389e-4, found, 20, noise, public=False)
            if not entry:
                assert "values" not in d.entry, seed
            elif "values" in d.entry:  # its values, a missed one written as the code below it
                coded_runs += 1
                assert all(v % 10 == 0 for v in d.entry["values"]), (seed, d.entry)
                assert len(set(d.entry["values"]) & set(range(0, 361, 10))) >= 35, (seed, d.entry)
            else:  # bins, each holding a whole ten (the decoder writes tens)
                bins = d.entry["bins"]
                assert all(any(a <= t < b for t in range(0, 1000, 10)) for a, b in zip(bins, bins[1:])), bins
    assert coded_runs >= 9


def test_a_repeated_column_with_an_identifiers_name_is_kept_at_a_wide_tables_noise():
    """A street type (2 values in 2,930 rows) at a 74-column table's facts rho, and a division code (3 values in
    1,350 of 2,784 rows) at a 41-column table's: their names read as an address and a key, so their DP facts
    decide. "Fewer distinct values than half the present ones by two deviations" kept the division code in 782
    draws of 1,000; under half by the noisy counts themselves, in 974. A unique column is seldom kept, down to a
    few hundred rows."""
    text = F.CLASSES.index("text")

    def exact(present: float, distinct: float, missing: float = 0.0) -> F.ExactFacts:
        classes = np.zeros(len(F.CLASSES))
        classes[text], classes[F.CLASSES.index("missing")] = present, missing
        return F.ExactFacts(classes, distinct, np.zeros(F.PLACES))

    def kept(facts: F.ExactFacts, rho: float) -> int:
        return sum(F.few_distinct(F.release("c", facts, rho, SeededDraws(s))) for s in range(1_000))

    assert kept(exact(2_930.0, 2.0), 1.408e-5) >= 995
    assert kept(exact(1_350.0, 3.0, 1_434.0), 2.541e-5) >= 960
    # free text named as such whose remarks repeat (a distinct share of 0.6-0.7) is dropped
    assert kept(exact(10_000.0, 6_000.0, 9_000.0), 4.96e-5) == 0 and kept(exact(2_000.0, 1_400.0), 2.5e-5) <= 100
    # a unique column kept (in 8 draws of 1,000 at 1,350 rows, where another class's noise stands in the present
    # count) is released as `<out-of-domain>` or as bins: no value of it passes a threshold
    for present in (300.0, 1_350.0, 2_930.0):
        assert kept(exact(present, present), 1.408e-5) <= 15


def test_round_one_never_stops_at_the_zeros_when_merged_cells_show_the_rest():
    """A second floor's area: 0 in 57% of 2,930 houses, the rest spread over [128, 2048) with 866 in [512, 1024).
    At a 74-column table's rho (sigma 132 a cell, a bar of 584) that octave fails in about one draw of four,
    and the zeros' cell alone was taken as the bounds, though the cells merged by 2 and 4 passed over the data:
    43% of the column was clipped to 2. A read-out is kept only where its span meets every passing cell of the
    coarser merges."""
    from privsynth.discovery import bounds as B

    rng = np.random.default_rng(3)
    raw = np.concatenate([np.zeros(1_678), rng.integers(128, 256, 19), rng.integers(256, 512, 148),
                          rng.integers(512, 1024, 866), rng.integers(1024, 2048, 219)]).astype(float)
    values, counts = np.unique(raw, return_counts=True)
    edges = B.log_edges()
    for seed in range(40):
        noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), 2.855e-5, SeededDraws(seed))
        found = B.coarse_bounds(noisy, sigma, edges, integer=True)
        assert found is not None and found.high >= 1024, (seed, found)
