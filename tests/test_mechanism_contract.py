"""The mechanism contract: a new mechanism is its module plus one catalogue entry (issue 32). A toy
mechanism, registered only there, is planned, charged, released, rounded, forecast and listed."""

from __future__ import annotations

import numpy as np
import pytest
import toy_mechanism

from privsynth.mechanisms import catalogue
from privsynth.mechanisms.base import MechanismModule
from privsynth.privacy.ledger import BudgetLedger
from privsynth.report.forecast import forecast
from privsynth.run.charge import ReleaseRequest, release_stage
from privsynth.run.releases import ReleaseStore
from privsynth.schema import parse_schema
from privsynth.schema.encoding import domain_of
from privsynth.schema.workload import Histogram

TOY = catalogue.MechanismEntry("toy", "toy_mechanism", "a test", "pure epsilon-DP", "showing the contract")


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(catalogue, "CATALOGUE", (*catalogue.CATALOGUE, TOY))
    monkeypatch.setitem(catalogue.ENTRIES, "toy", TOY)


def test_the_toy_module_satisfies_the_protocol():
    module: MechanismModule = toy_mechanism  # a type checker accepts the module as the protocol
    assert module.NAME == "toy" and callable(module.run)


def test_a_registered_mechanism_runs_through_plan_charge_report_and_listing(registered, tmp_path):
    toy = catalogue.load("toy")
    assert toy.NAME == "toy" and toy.releases_n_estimate(None) and not toy.caps_rows
    assert toy.check_feasible is None and toy.forecast_cost is None and toy.neighbours == catalogue.ADD_REMOVE
    schema = parse_schema({"name": "t", "columns": [{"name": "a", "type": "categorical", "categories": ["x", "y"]},
                                                    {"name": "b", "type": "integer", "bounds": [0, 4],
                                                     "bins": [0, 1, 2, 3, 4]}]})
    domain = domain_of(schema)
    config = catalogue.mechanism_config(toy, 1.0, 1e-9, None, {})
    config = toy.configure_for(config, domain)
    toy.check_config(config, domain)
    codes = np.random.default_rng(0).integers(0, 2, size=(500, 2))
    with BudgetLedger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        ledger.set_budget("t", epsilon=2.0)
        request = ReleaseRequest(mechanism=toy, config=config, statistics=Histogram.of_codes(codes), domain=domain,
                                 key="toy-key", dataset="t", delta=1e-9, seed=1, column_names=tuple(domain.names))
        outcome = release_stage(request, store=ReleaseStore(tmp_path / "store"), ledger=ledger)
        assert ledger.status("t")[0].charges == 1
    assert outcome.privacy["mechanism"] == "toy" and outcome.privacy["cost"]["pure_epsilon"] == 1.0
    result = forecast(toy.NAME, toy.privacy_cost(config), 1.0, None, domain, 500, toy.caps_rows)
    assert result.mechanism == "toy"
    assert ("toy (default)" not in catalogue.describe_mechanisms("aim")
            and "\ntoy " in catalogue.describe_mechanisms("aim"))


def test_an_unknown_mechanism_is_one_clear_error():
    from privsynth.errors import UnknownMechanismError

    with pytest.raises(UnknownMechanismError, match="unknown mechanism 'nope'"):
        catalogue.load("nope")
