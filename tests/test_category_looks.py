"""Categories by need (issue 37.1): a first look per categorical column, then the pooled rest on the columns whose
first look left values unfound. The second look is one Gaussian measurement at the summed rho, and a value held
by one record is released with probability at most delta_tau over both looks."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import Exact

import privsynth
from privsynth.discovery.categories import (
    CANDIDATE_SIGMAS,
    CategoryRelease,
    candidate_sigmas,
    dp_categories,
    pool_shares,
    shows_unfound,
    sibling_candidates,
    threshold,
    unfound_mass,
)
from privsynth.discovery.public_lists import list_candidates, public_complements
from privsynth.privacy.accounting import gaussian_sigma


class Drawn:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def add_gaussian(self, values, sigma, *, sensitivity=None):
        values = np.asarray(values, dtype=np.float64)
        return values + self.rng.normal(0.0, sigma, values.shape)


def test_a_second_look_is_one_measurement_at_the_summed_rho():
    values, counts = ["a", "b", "c"], np.array([900.0, 120.0, 40.0])
    first = dp_categories(values, counts, 0.002, 1e-9, Exact())
    second = dp_categories(values, counts, 0.006, 1e-9, Exact(), prior=first)
    assert second.sigma == pytest.approx(gaussian_sigma(0.008))
    assert second.tau == pytest.approx(threshold(gaussian_sigma(0.008), 1e-9))
    assert second.observed.tolist() == counts.tolist()  # a weighted mean of unbiased counts: unbiased
    drawn = [dp_categories(values, counts, 0.006, 1e-9, Drawn(s), prior=dp_categories(values, counts, 0.002, 1e-9,
                                                                                          Drawn(10_000 + s)))
             for s in range(3000)]
    spread = np.std([d.observed[0] for d in drawn])
    assert spread == pytest.approx(gaussian_sigma(0.008), rel=0.05)  # the summed rho's noise, not more
    with pytest.raises(ValueError, match="same order"):
        dp_categories(values[:2], counts[:2], 0.006, 1e-9, Exact(), prior=first)


def test_a_value_held_by_one_record_is_released_with_at_most_delta_tau_over_both_looks():
    """The attack: a neighbour adds one record with a new value. Each look thresholds at half the column's
    delta_tau, so over both looks (a second look or not) the new value shows with probability <= delta_tau."""
    delta_tau, trials, shown = 0.2, 4000, 0
    for s in range(trials):
        noise = Drawn(s)
        first = dp_categories(["new"], np.array([1.0]), 0.01, delta_tau / 2, noise)
        second = dp_categories(["new"], np.array([1.0]), 0.03, delta_tau / 2, noise, prior=first)
        shown += bool(first.categories or second.categories)
    rate = shown / trials
    assert rate <= delta_tau + 3 * (delta_tau * (1 - delta_tau) / trials) ** 0.5
    assert rate > delta_tau / 2  # two chances: more than one look's share (the bound is not vacuous)


def test_a_first_look_shows_values_unfound_only_beyond_its_noise():
    whole = CategoryRelease(("no", "yes"), 20.0, 150.0, kept_mass=3000.0, noisy=(1800.0, 1200.0))
    assert not shows_unfound(whole, 3010.0, 60.0)  # the kept values hold the present count, within noise
    assert shows_unfound(whole, 3600.0, 60.0)  # 600 present values fall in no kept category
    assert shows_unfound(whole, None, 0.0)  # no present count: nothing shows the column whole


def test_yes_no_columns_found_whole_give_their_budget_to_a_column_of_rare_codes(tmp_path):
    rng = np.random.default_rng(3)
    n = 4000
    frame = pd.DataFrame({f"flag{i}": rng.choice(["no", "yes"], n) for i in range(8)})
    codes = rng.choice(["a", "b", "c"], n, p=[0.6, 0.25, 0.15]).astype(object)
    codes[:500] = [f"r{i}" for i in range(500)]  # 12.5% in values held once: never found, always unfound
    frame["code"] = codes
    frame.to_csv(tmp_path / "t.csv", index=False)
    text = privsynth.discovery.draft_schema(str(tmp_path / "t.csv"), privsynth.discovery.DraftOptions(
        name="t", epsilon=1.0, ledger=f"sqlite:///{tmp_path / 'l.db'}", require_budget=False, seed=1)).text
    split = re.finditer(r"#   (\w+): facts [\d.e-]+, categories ([\d.e-]+)", text)
    spent = {m.group(1): float(m.group(2)) for m in split}
    flags = sorted(spent[f"flag{i}"] for i in range(8))
    # most flags are found whole and keep only their first look (a flag flagged in vain shares the pool)
    assert spent["code"] == max(spent.values()) > 2.5 * flags[0] and flags.count(flags[0]) >= 4
    thresholds = [float(t.replace(",", "")) for t in re.findall(r"passed the threshold \(([\d,]+) rows", text)]
    assert min(thresholds) < 0.6 * max(thresholds)  # the rare codes' column is read at a far lower threshold
    columns = {c["name"]: c for c in yaml.safe_load(text)["columns"]}
    assert all(columns[f"flag{i}"]["categories"] == ["no", "yes"] for i in range(8))
    assert columns["code"]["categories"] == ["a", "b", "c"]
    budget = re.search(r"rho ([\d.e-]+)-zCDP, charged", text)
    assert budget and sum(spent.values()) + sum(float(x) for x in re.findall(r"facts ([\d.e-]+)", text)) == \
        pytest.approx(float(budget.group(1)), rel=1e-3)  # the header's figures have 4 significant digits


def test_what_a_column_may_be_short_of_is_its_unfound_estimate_plus_one_deviation():
    """present - kept + sd, sd = hypot(present's, kept values' sigma x sqrt(kept)): a yes/no column of 4,406 rows
    that kept "no" (4,003) under a present count of 4,205 (deviation 151) is weighed 202 + 169 = 371, not 202,
    beside a code column 2,000 short: its share of the pool is 15% rather than 9%."""
    yes_no = CategoryRelease(("no",), 75.0, 522.0, kept_mass=4003.0, noisy=(4003.0,))
    sd = math.hypot(151.0, 75.0)
    assert unfound_mass(yes_no, 4205.0, 151.0) == pytest.approx(202.0 + sd)
    assert unfound_mass(yes_no, 3000.0, 151.0) == 0.0  # never below nothing
    assert unfound_mass(yes_no, None, 0.0) is None
    codes = CategoryRelease(("a", "b"), 75.0, 522.0, kept_mass=2000.0, noisy=(1200.0, 800.0))
    weights = {"yes_no": unfound_mass(yes_no, 4205.0, 151.0), "codes": unfound_mass(codes, 4000.0, 151.0)}
    shares = pool_shares(weights, 1e-3, 75.0, 1e-12)  # both could find a value of their mass: none gives back
    assert shares["yes_no"] / 1e-3 == pytest.approx(371.0 / (371.0 + 2000.0 + math.hypot(151.0, 75.0 * 2 ** 0.5)),
                                                     rel=1e-3)


def test_the_pool_goes_to_columns_by_their_unfound_mass():
    sigma = gaussian_sigma(2e-5)
    shares = pool_shares({"codes": 2400.0, "style": 1200.0, "kind": 600.0}, 1e-3, sigma, 1e-12)
    assert sum(shares.values()) == pytest.approx(1e-3)
    assert shares["codes"] == pytest.approx(2 * shares["style"])
    assert shares["style"] == pytest.approx(2 * shares["kind"])
    # no present count measured: weighed as the most unfound column
    assert pool_shares({"a": 900.0, "b": None}, 1e-3, sigma, 1e-12) == pytest.approx({"a": 5e-4, "b": 5e-4})


def test_a_column_that_could_find_nothing_gives_its_share_back():
    """Ten rows unfound can pass no threshold of this budget (hundreds of rows): its share goes to the column
    whose unfound values could pass, and the pool is spent whole."""
    sigma = gaussian_sigma(2e-5)
    shares = pool_shares({"roof": 10.0, "codes": 2400.0}, 1e-3, sigma, 1e-12)
    assert shares == pytest.approx({"codes": 1e-3})
    reach = threshold((sigma ** -2 + gaussian_sigma(1e-3) ** -2) ** -0.5, 1e-12)
    assert 10.0 < reach < 2400.0  # the rule's premise, computed
    # every column short of what it could find: none gives its share back (the pool is split by mass)
    alike = pool_shares({"a": 10.0, "b": 20.0}, 1e-3, sigma, 1e-12)
    assert alike == pytest.approx({"a": 1e-3 / 3, "b": 2e-3 / 3})
    assert pool_shares({}, 1e-3, sigma, 1e-12) == {}


def test_a_column_of_few_present_values_whose_first_look_found_nothing_looks_again():
    """1,155 masonry types among 2,930 houses, under noise 298 a class: no class stands four deviations out,
    so the present count read 0, no value showed unfound, and the one category above the pooled threshold
    (880 rows) stayed lost in about half the runs. The likeliest present class's noisy count stands in."""
    from privsynth.discovery.facts import CLASSES, NoisyFacts

    classes = [0.0] * len(CLASSES)
    classes[CLASSES.index("missing")] = 1775.0
    classes[CLASSES.index("text")] = 1100.0
    classes[CLASSES.index("whole")] = -250.0
    facts = NoisyFacts("Mas_Vnr_Type", tuple(classes), 4.0, 298.0, 298.0)
    assert facts.present_standing == 0.0 and facts.present_for_values() == (1100.0, 298.0)
    nothing = CategoryRelease((), 150.0, 1000.0)
    assert not shows_unfound(nothing, facts.present_standing, facts.present_standing_sd)  # the old reading
    assert shows_unfound(nothing, *facts.present_for_values())
    classes[CLASSES.index("text")] = 2500.0  # a class that stands: the standing present count, as before
    standing = NoisyFacts("t", tuple(classes), 4.0, 298.0, 298.0)
    assert standing.present_for_values() == (standing.present_standing, standing.present_standing_sd)


def test_the_pool_is_spent_whole_on_the_short_columns_whatever_their_estimates():
    rng = np.random.default_rng(7)
    for _ in range(300):
        k = int(rng.integers(1, 12))
        unfound = {f"c{i}": (None if rng.random() < 0.1 else float(rng.choice([0.0, *rng.gamma(1.0, 500.0, 3)])))
                   for i in range(k)}
        pool = float(rng.uniform(1e-5, 1e-2))
        shares = pool_shares(unfound, pool, gaussian_sigma(float(rng.uniform(1e-6, 1e-3))), 1e-12)
        assert set(shares) <= set(unfound) and shares
        assert sum(shares.values()) == pytest.approx(pool) and all(v > 0 for v in shares.values())


class Metered:
    """No noise; records each Gaussian vector's true counts and sigma."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, float]] = []

    def add_gaussian(self, values, sigma, *, sensitivity=None):
        values = np.asarray(values, dtype=np.float64)
        self.calls.append((values.copy(), sigma))
        return values


def test_a_column_lacking_a_value_its_siblings_released_gets_it_as_a_candidate():
    found = {"lunch_k": ("free", "paid"), "lunch_1": ("paid",), "school": ("rural", "urban"), "alone": ("x",)}
    assert {name: sibling_candidates(found, name) for name in found} == \
        {"lunch_k": (), "lunch_1": ("free",), "school": (), "alone": ()}
    assert sibling_candidates({"a": (), "b": ("yes",)}, "a") == ()  # nothing shared: no sibling


def test_a_candidate_passes_at_three_deviations_where_the_observed_threshold_would_lose_it():
    values, counts = ["paid", "free", "rare"], np.array([3000.0, 400.0, 7.0])
    rho = 5e-5  # sigma 100: the observed values' threshold is about 700 rows at delta 1e-9
    first = dp_categories(values, counts, rho, 1e-9, Exact())
    assert first.categories == ("paid",) and first.tau > 600
    assert dp_categories(values, counts, rho, 1e-9, Exact(), prior=first).categories == ("paid",)  # 400 < tau
    noise = Metered()
    look = dp_categories(values, counts, rho, 1e-9, noise, prior=first, candidates=("free", "gone"))
    assert look.categories == ("free", "paid")  # 400 > 3 sigma; "gone" (count 0) is not kept
    assert CANDIDATE_SIGMAS * gaussian_sigma(rho) < 400 < look.tau
    # one draw: the observed values less the candidates, then the public candidates, each counted whether the
    # column holds it or not
    assert [(v.tolist(), s) for v, s in noise.calls] == [([3000.0, 7.0, 400.0, 0.0],
                                                          pytest.approx(gaussian_sigma(rho)))]
    assert look.kept_mass == pytest.approx(3400.0)


def test_a_look_with_candidates_moves_one_cell_for_one_record():
    """Sensitivity: with candidates, the observed values among them leave the thresholded histogram, so a record
    (of any value, new or not) moves one cell of the look's vectors by one: the look costs its rho."""
    values, counts = ["a", "b", "c"], np.array([50.0, 30.0, 20.0])
    for extra in ("a", "b", "c", "new"):
        here, there = Metered(), Metered()
        dp_categories(values, counts, 1e-3, 1e-9, here, candidates=("b", "z"))
        more_values = values if extra in values else [*values, extra]
        more = np.array([counts[i] + (v == extra) for i, v in enumerate(values)] + ([1.0] if extra not in values
                                                                                   else []))
        dp_categories(more_values, more, 1e-3, 1e-9, there, candidates=("b", "z"))
        ((u, _),), ((v, _),) = here.calls, there.calls  # one draw each: [a, c | b, z] (observed less candidates)
        if extra not in values:  # the new value: one more observed cell, [a, c, new | b, z]
            moved = float(np.abs(u[:2] - v[:2]).sum() + v[2] + np.abs(u[2:] - v[3:]).sum())
        else:
            moved = float(np.abs(u - v).sum())
        assert moved == 1.0, extra


def test_a_look_with_letters_moves_one_cell_for_one_record():
    """Sensitivity with both candidate lists: the observed values (less both lists), the candidates, the letters
    (less the candidates) are disjoint cells of one draw, so a record of any value moves one cell by one."""
    values, counts = ["a", "b", "c"], np.array([50.0, 30.0, 20.0])
    for extra in ("a", "b", "c", "q", "new"):
        here, there = Metered(), Metered()
        dp_categories(values, counts, 1e-3, 1e-9, here, candidates=("b", "z"), listed=("c", "q", "z"))
        more_values = values if extra in values else [*values, extra]
        more = np.array([counts[i] + (v == extra) for i, v in enumerate(values)] + ([1.0] if extra not in values
                                                                                   else []))
        dp_categories(more_values, more, 1e-3, 1e-9, there, candidates=("b", "z"), listed=("c", "q", "z"))
        ((u, _),), ((v, _),) = here.calls, there.calls  # [a | b, z | c, q], then [a (, new) | b, z | c, q]
        if extra == "new":  # a value on no list: one more observed cell
            assert len(v) == len(u) + 1
            v = np.delete(v, 1)  # the new observed cell, read apart
            moved = float(np.abs(u - v).sum()) + float(there.calls[0][0][1])
        else:
            moved = float(np.abs(u - v).sum())
        assert moved == 1.0, extra


def test_a_value_held_by_one_record_is_released_with_at_most_delta_tau_with_candidates():
    """The attack of the test above with candidates in the second look: the new value is no candidate (it is no
    other column's release), so its two looks are thresholded as before; a candidate the column does not hold
    is kept only at the public list's rate (3 deviations: 0.13%)."""
    delta_tau, trials, shown, phantom = 0.2, 4000, 0, 0
    for s in range(trials):
        noise = Drawn(s)
        first = dp_categories(["new", "old"], np.array([1.0, 500.0]), 0.01, delta_tau / 2, noise)
        second = dp_categories(["new", "old"], np.array([1.0, 500.0]), 0.03, delta_tau / 2, noise, prior=first,
                               candidates=("elsewhere",))
        shown += any("new" in r.categories for r in (first, second))
        phantom += "elsewhere" in second.categories
    rate = shown / trials
    assert rate <= delta_tau + 3 * (delta_tau * (1 - delta_tau) / trials) ** 0.5
    assert phantom <= 0.0013 * trials + 3 * (0.0013 * trials) ** 0.5


def test_a_value_of_a_public_pair_makes_its_partner_a_candidate():
    assert public_complements(("N",)) == ("Y",)
    assert public_complements(("no", "maybe")) == ("yes",)
    assert public_complements(("FALSE",)) == ("TRUE",)
    assert public_complements(("F",)) == ("M", "T")  # both partners are measured; an absent one is kept w.p. 0.13%
    assert public_complements(("Y", "N")) == () and public_complements(("north", "south")) == ()
    assert public_complements(("No ",)) == ("Yes",)  # blanks around a value are not part of it


def test_a_column_with_candidates_is_not_given_up_where_its_candidates_bar_reaches():
    """A flag short of 250 rows at a 41-column table's first look (sigma 175): the observed values' threshold at
    the pooled rho cannot reach 250 rows, so the flag gave its share back; its partner "Y", a public candidate,
    passes at 3 deviations of the second look, which the same share reaches."""
    sigma, pool = gaussian_sigma(1.63e-5), 2e-3
    unfound = {"flag": 250.0, "codes": 2400.0}
    assert pool_shares(unfound, pool, sigma, 1e-11) == pytest.approx({"codes": pool})
    shares = pool_shares(unfound, pool, sigma, 1e-11, frozenset({"flag"}))
    assert shares["flag"] == pytest.approx(pool * 250.0 / 2650.0)
    assert CANDIDATE_SIGMAS * gaussian_sigma(shares["flag"]) < 250.0 < threshold(
        (sigma ** -2 + gaussian_sigma(shares["flag"]) ** -2) ** -0.5, 1e-11)


def test_a_rare_yes_of_a_wide_table_s_flags_is_found_as_a_public_partner(tmp_path, monkeypatch):
    """Twelve yes/no flags, "Y" in 10% of 3,000 rows, beside 28 columns of codes, at epsilon 0.5: the observed
    values' threshold over both looks (about 350 rows and more) loses every "Y"; as the partner of the "N" each
    flag released, it is measured at 3 deviations of the second look alone."""
    rng = np.random.default_rng(4)
    n = 3000
    frame = pd.DataFrame({f"flag{i}": rng.choice(["N", "Y"], n, p=[0.9, 0.1]) for i in range(12)})
    for i in range(28):
        frame[f"code{i}"] = rng.choice(["a", "b", "c"], n)
    frame.to_csv(tmp_path / "t.csv", index=False)

    def found(complements: bool, seed: int) -> int:
        if not complements:  # no pair, and no letter ("Y" is one of the letters beside an "N")
            monkeypatch.setattr("privsynth.discovery.public_lists.COMPLEMENTS", {})
            monkeypatch.setattr("privsynth.discovery.discover.list_candidates", lambda categories: ())
        ledger = f"sqlite:///{tmp_path / f'l{complements}{seed}.db'}"
        text = privsynth.discovery.draft_schema(str(tmp_path / "t.csv"), privsynth.discovery.DraftOptions(
            name="t", epsilon=0.5, ledger=ledger, require_budget=False, seed=seed)).text
        columns = {c["name"]: c for c in yaml.safe_load(text)["columns"]}
        assert all(columns[f"flag{i}"]["categories"] in (["N"], ["N", "Y"]) for i in range(12))
        return sum(columns[f"flag{i}"]["categories"] == ["N", "Y"] for i in range(12))

    # 4.4 of 12 a draw (24 draws): three draws hold about 13, and 6 is 2.3 of their deviations below
    assert sum(found(True, seed) for seed in (1, 2, 3)) >= 6 and found(False, 1) == 0


def test_a_column_of_one_letter_codes_takes_the_other_letters_as_candidates():
    assert list_candidates(("W",)) == tuple("ABCDEFGHIJKLMNOPQRSTUVXYZ")
    assert list_candidates(("a", "c ")) == tuple("bdefghijklmnopqrstuvwxyz")  # blanks around a value are not part of it
    assert list_candidates(("A", "b")) == ()  # two cases: no one alphabet
    assert list_candidates(("AB", "XY")) == () and list_candidates(()) == () and list_candidates(("1",)) == ()
    assert list_candidates(("É",)) == ()


def test_a_column_of_members_of_one_public_list_takes_the_rest_of_it_as_candidates():
    states = list_candidates(("CA", "TX"))
    assert len(states) == 54 and "NY" in states and "CA" not in states
    assert "GB" in list_candidates(("US", "FR")) and len(list_candidates(("US", "FR"))) == 247
    assert list_candidates(("CA", "IN")) == ()  # states and countries both: no one list
    assert list_candidates(("CA",)) == ()  # one value is too little for a list of states
    assert list_candidates(("ca", "ny"))[:2] == ("ak", "al")  # written as the column writes its values
    assert "District of Columbia" in list_candidates(("New York", "Texas"))  # as listed, not title-cased
    assert "WEST VIRGINIA" in list_candidates(("NEW YORK", "TEXAS"))
    assert list_candidates(("Jan", "Feb")) == ("Apr", "Aug", "Dec", "Jul", "Jun", "Mar", "May", "Nov", "Oct", "Sep")
    assert "May" in list_candidates(("June", "July")) and list_candidates(("Monday", "Friday"))[0] == "Saturday"
    assert list_candidates(("CA", "TX", "ZZ")) == ()  # a third of them on no list
    hotel = ("bel", "cn", "deu", "esp", "fra", "gbr", "irl", "nld", "prt")  # ISO alpha-3 beside the table's own "cn"
    assert len(list_candidates(hotel)) == 241 and "usa" in list_candidates(hotel)
    assert len(list_candidates(("CA", "TX", "IN"))) == 53  # all three states, two of three countries
    assert list_candidates(("Georgia", "Texas"))[0] == "Alabama" and list_candidates(("Georgia", "France"))[0] == \
        "Afghanistan"  # a state and a country, read by the other value
    assert "United States" in list_candidates(("Germany", "France"))  # country names, ISO's and their common ones
    # baseball's leagues read as two countries (Albania, the Netherlands): measured against them only if the column
    # shows values unfound, any of the 247 passing by noise in 0.13% of such columns
    assert len(list_candidates(("AL", "NL"))) == 247


def test_many_candidates_pass_by_noise_at_the_rate_of_one():
    """Bonferroni over a look's candidates: 25 absent letters pass, any of them, about as often as one absent
    partner passes at 3 deviations (0.13%); one candidate keeps the 3 deviations."""
    assert candidate_sigmas(1) == pytest.approx(CANDIDATE_SIGMAS)
    assert candidate_sigmas(25) == pytest.approx(3.88, abs=0.01)
    trials, phantom, partner = 6000, 0, 0
    letters = tuple("ABCDEFGHIJKLMNOPQRSTUVXYZ")
    rng_noise = Drawn(11)
    for _ in range(trials):
        look = dp_categories(["W"], np.array([600.0]), 1e-4, 1e-9, rng_noise, candidates=("Y",), listed=letters)
        phantom += any(v in look.categories for v in letters if v != "Y")
        partner += "Y" in look.categories
    bound = 0.00135 * trials + 3 * (0.00135 * trials) ** 0.5
    assert phantom <= bound and partner <= bound
    look = dp_categories(["W"], np.array([600.0]), 1e-4, 1e-9, Exact(), candidates=("Y",), listed=letters)
    sigma = gaussian_sigma(1e-4)  # the partner keeps its 3 deviations beside the letters' 3.9
    assert dict(zip(look.categories, look.bars)) == {"W": pytest.approx(look.tau)}
    held = dp_categories(["W", "Y", "E"], np.array([600.0, 250.0, 320.0]), 1e-4, 1e-9, Exact(), candidates=("Y",),
                         listed=letters)
    assert dict(zip(held.categories, held.bars)) == {"E": pytest.approx(candidate_sigmas(24) * sigma),
                                                      "W": pytest.approx(held.tau),
                                                      "Y": pytest.approx(CANDIDATE_SIGMAS * sigma)}


def test_a_division_code_s_lost_letters_are_found_as_public_candidates(tmp_path, monkeypatch):
    """Eight division codes ("E" 40%, "W" 15%, "C" 10%, missing otherwise) beside 32 columns of codes, 3,000 rows
    at epsilon 0.5: the first look finds "E" (its threshold is about 880 rows), and the observed values'
    threshold over both looks (450-560 rows) loses "C" in every column; as one of 25 letters it is measured at
    3.9 deviations of the second look alone (260-330 rows), and once found, as a sibling's value at 3."""
    rng = np.random.default_rng(5)
    n = 3000
    frame = pd.DataFrame({f"division{i}": rng.choice(["E", "W", "C", None], n, p=[0.4, 0.15, 0.1, 0.35])
                          for i in range(8)})
    for i in range(32):
        frame[f"code{i}"] = rng.choice(["a", "b", "c"], n)
    frame.to_csv(tmp_path / "t.csv", index=False)

    def found(alphabet: bool) -> tuple[int, int]:
        if not alphabet:
            monkeypatch.setattr("privsynth.discovery.discover.list_candidates", lambda categories: ())
        ledger = f"sqlite:///{tmp_path / f'l{alphabet}.db'}"
        text = privsynth.discovery.draft_schema(str(tmp_path / "t.csv"), privsynth.discovery.DraftOptions(
            name="t", epsilon=0.5, ledger=ledger, require_budget=False, seed=2)).text
        columns = {c["name"]: c for c in yaml.safe_load(text)["columns"]}
        kept = [set(columns[f"division{i}"]["categories"]) for i in range(8)]
        assert all(k <= {"E", "W", "C"} for k in kept)  # no letter of noise
        return sum(len(k) for k in kept), sum("C" in k for k in kept)

    with_letters, without = found(True), found(False)
    assert with_letters[0] > without[0] and with_letters[1] >= 2 and without[1] == 0, (with_letters, without)


@pytest.mark.slow  # eight drafts of a 40-column table (a minute); the division test above runs the same path by default
def test_a_state_column_finds_more_states_as_members_of_a_public_list(tmp_path, monkeypatch):
    """One column of 20 US state codes (two at 30% and 20% of 6,000 rows, eight at 4.5%, ten at 1.4%) beside 39
    columns of codes, at epsilon 0.5: the observed values' threshold finds the ten largest; measured as the other
    54 members of the list of state codes (4.3 deviations of the second look), 10 to 17 are found (six draws),
    never a state the column does not hold."""
    rng = np.random.default_rng(6)
    n = 6000
    states = ["CA", "TX", "NY", "FL", "IL", "PA", "OH", "GA", "NC", "MI",
              "NJ", "VA", "WA", "AZ", "MA", "TN", "IN", "MO", "MD", "WI"]
    frame = pd.DataFrame({"state": rng.choice(states, n, p=[0.3, 0.2] + [0.045] * 8 + [0.014] * 10)})
    for i in range(39):
        frame[f"code{i}"] = rng.choice(["a", "b", "c"], n)
    frame.to_csv(tmp_path / "t.csv", index=False)

    def found(lists: bool, seed: int) -> int:
        if not lists:
            monkeypatch.setattr("privsynth.discovery.discover.list_candidates", lambda categories: ())
        ledger = f"sqlite:///{tmp_path / f'l{lists}{seed}.db'}"
        text = privsynth.discovery.draft_schema(str(tmp_path / "t.csv"), privsynth.discovery.DraftOptions(
            name="t", epsilon=0.5, ledger=ledger, require_budget=False, seed=seed)).text
        kept = {c["name"]: c for c in yaml.safe_load(text)["columns"]}["state"]["categories"]
        assert set(kept) <= set(states)
        return len(kept)

    with_lists = [found(True, seed) for seed in (1, 2, 3, 4)]
    without = [found(False, seed) for seed in (1, 2, 3, 4)]
    assert sum(with_lists) >= sum(without) + 4, (with_lists, without)
