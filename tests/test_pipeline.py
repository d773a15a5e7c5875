"""The stage functions' wiring of run parameters into mechanism configs."""

import pytest
from pydantic import ValidationError

from privsynth.mechanisms import get_mechanism
from privsynth.mechanisms.catalogue import mechanism_config


def test_rows_set_k_only_where_the_guarantee_caps_rows():
    rap = mechanism_config(get_mechanism("rap"), 1.0, 1e-9, 500, {})
    assert rap.k == 3  # RAP's k is the marginal order; --rows is post-processing for it
    sampling = mechanism_config(get_mechanism("private_sampling"), 3.0, 1e-9, 1, {})
    assert sampling.k == 1


def test_options_override_and_are_validated():
    config = mechanism_config(get_mechanism("reduced_space"), 2.0, 1e-9, None, {"workload": "1way+2way"})
    assert config.epsilon == 2.0 and config.workload == "1way+2way"
    with pytest.raises(ValidationError, match="workload"):
        mechanism_config(get_mechanism("reduced_space"), 2.0, 1e-9, None, {"workload": "9way"})
    with pytest.raises(ValidationError):
        mechanism_config(get_mechanism("rap"), 1.0, 1e-9, None, {"no_such_option": 1})


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
    assert outcome.audit is None and outcome.rounding["rows"] == 30 and not outcome.reused
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
    from privsynth.run.stages import output_rows

    assert output_rows(None, {"exact_release": True}) is None  # an exact release is published as it is
    assert output_rows(40, {"release_facts": {"n_estimate": 123.4}}) == 40
    assert output_rows(None, {"release_facts": {"n_estimate": 123.4}}) == 123  # the release's own DP estimate
    assert output_rows(None, {"release_facts": {"n_estimate": -3.0}}) == 1
    with pytest.raises(ValueError, match="no DP estimate of n"):
        output_rows(None, {"mechanism": "x", "release_facts": {}})
