"""The stage functions' wiring of run parameters into mechanism configs."""

import pytest
from pydantic import ValidationError

from privsynth.mechanisms.catalogue import load, mechanism_config


def test_rows_set_k_only_where_the_guarantee_caps_rows():
    rap = mechanism_config(load("rap"), 1.0, 1e-9, 500, {})
    assert rap.k == 3  # RAP's k is the marginal order; --rows is post-processing for it
    sampling = mechanism_config(load("private_sampling"), 3.0, 1e-9, 1, {})
    assert sampling.k == 1


def test_options_override_and_are_validated():
    config = mechanism_config(load("reduced_space"), 2.0, 1e-9, None, {"workload": "1way+2way"})
    assert config.epsilon == 2.0 and config.workload == "1way+2way"
    with pytest.raises(ValidationError, match="workload"):
        mechanism_config(load("reduced_space"), 2.0, 1e-9, None, {"workload": "9way"})
    with pytest.raises(ValidationError):
        mechanism_config(load("rap"), 1.0, 1e-9, None, {"no_such_option": 1})


# ---------------------------------------------------------------- the one orchestration

def _context(tmp_path, **overrides):
    from conftest import TOY_SCHEMA, toy_frame

    from privsynth.run.parameters import RunParameters
    from privsynth.run.prepare import prepare_run
    from privsynth.schema import parse_schema

    values = dict(mechanism="reduced_space", rows=30, unlimited=True, output=str(tmp_path / "run"),
                  ledger=f"sqlite:///{tmp_path / 'ledger.sqlite'}", mechanism_options={"points_per_statistic": 1.0})
    values.update(overrides)
    return prepare_run(RunParameters(**values), data=toy_frame(120), schema=parse_schema(TOY_SCHEMA),
                       release_store=tmp_path / "store")


def test_execute_runs_the_stages_in_order_through_the_runner_and_deletes_private_files(tmp_path):
    from privsynth.run.stages import execute

    ctx = _context(tmp_path)
    assert ctx.private_dir.is_dir() and oct(ctx.private_dir.stat().st_mode & 0o777) == "0o700"
    calls = []

    def runner(name, stage, *args):
        calls.append(name)
        return stage(*args)

    outcome = execute(ctx, runner)
    assert calls == ["validate", "binarise", "mechanism", "rounding", "report"]  # no audit unless asked for
    assert not ctx.private_dir.exists()
    assert outcome.audit is None and outcome.rounding.rows == 30 and not outcome.reused
    manifest_stages = set(ctx.folder.manifest["stages"])
    assert manifest_stages == {"validate", "binarise", "mechanism", "rounding", "report"}
    assert ctx.folder.manifest["finished"]


def test_a_failing_stage_still_deletes_the_private_files_and_charges_nothing(tmp_path):
    from privsynth.privacy.ledger import BudgetLedger, UnknownDatasetError
    from privsynth.run.stages import execute

    ctx = _context(tmp_path)

    def runner(name, stage, *args):
        if name == "mechanism":
            raise OSError("disk gone")
        return stage(*args)

    with pytest.raises(OSError, match="disk gone"):
        execute(ctx, runner)
    assert not ctx.private_dir.exists()
    assert (ctx.private_dir / "histogram.parquet").exists() is False
    with pytest.raises(UnknownDatasetError):
        BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}").history("toy")


def test_keep_private_keeps_the_intermediates_for_debugging(tmp_path):
    import shutil

    from privsynth.run.context import direct
    from privsynth.run.stages import execute

    ctx = _context(tmp_path, keep_private=True)
    try:
        execute(ctx, direct)
        assert (ctx.private_dir / "histogram.parquet").is_file()
        assert not (tmp_path / "run" / "histogram.parquet").exists()  # never in the run folder
    finally:
        shutil.rmtree(ctx.private_dir, ignore_errors=True)


def test_output_rows_never_reads_the_private_count():
    from privsynth.run.results import PrivacyRecord
    from privsynth.run.stages import output_rows

    def record(**document):
        return PrivacyRecord.of(document)

    assert output_rows(None, record(exact_release=True)) is None  # an exact release is published as it is
    assert output_rows(40, record(release_facts={"n_estimate": 123.4})) == 40
    assert output_rows(None, record(release_facts={"n_estimate": 123.4})) == 123  # the release's own DP estimate
    assert output_rows(None, record(release_facts={"n_estimate": -3.0})) == 1
    with pytest.raises(ValueError, match="no DP estimate of n"):
        output_rows(None, record(mechanism="x", release_facts={}))


def test_privacy_json_names_measured_marginals_by_column():
    # Found on a first run: privacy.json listed measured marginals as attribute indices ([3, 4, 8]).
    from privsynth.run.charge import named_marginals

    facts = {"rounds": 2, "measured_marginals": [[0, 2], [1]]}
    assert named_marginals(facts, ("age", "sex", "income")) == {"rounds": 2,
                                                                "measured_marginals": [["age", "income"], ["sex"]]}
    assert named_marginals({"rounds": 1}, ("age",)) == {"rounds": 1}


def test_the_bundled_example_is_said_to_be_public_not_spent_without_a_limit(tmp_path):
    # Found on a first run: the default `privsynth run` (no flag) said "spending WITHOUT A LIMIT (explicitly allowed)".
    from privsynth.privacy.accounting import PrivacyCost
    from privsynth.privacy.ledger import BudgetLedger
    from privsynth.run.prepare import precheck_budget

    ledger = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    cost = PrivacyCost.zcdp(0.01, "test")
    example = precheck_budget(ledger, "adult", cost, unlimited=True, public_example=True, seeded=False,
                              allow_seed_with_budget=False)
    assert "bundled example" in example and "public data" in example and "WITHOUT A LIMIT" not in example
    asked = precheck_budget(ledger, "mine", cost, unlimited=True, seeded=False, allow_seed_with_budget=False)
    assert "WITHOUT A LIMIT" in asked and "--unlimited" in asked


def test_the_manifest_names_the_bundled_example_and_local_paths_without_this_machines_layout(tmp_path, monkeypatch):
    # Found on a first run: manifest.json held absolute local paths (the site-packages folder of the example).
    from privsynth.run.parameters import bundled_example
    from privsynth.run.prepare import public_path

    data, schema = bundled_example()
    assert public_path(f"csv:{data}") == "csv:<bundled example>/adult.csv.gz"
    assert public_path(schema) == "<bundled example>/adult.yaml"
    monkeypatch.chdir(tmp_path)
    assert public_path(f"csv:{tmp_path / 'in' / 't.csv'}") == "csv:in/t.csv"
    assert public_path("sql:postgresql://host/db table=t") == "sql:postgresql://host/db table=t"
