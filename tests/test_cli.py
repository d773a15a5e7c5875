"""The ``privsynth`` command: its options, the budget commands, and its error contract.

Errors in the input or parameters exit with status 2 and print one line that names what is wrong;
no traceback. Most tests call ``privsynth.cli.main`` in process; two run the installed entry point.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privsynth.cli import EXIT_USAGE, main
from privsynth.io import InputError
from privsynth.mechanisms import MECHANISM_MODULES
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.ledger import BudgetLedger
from privsynth.run.parameters import RunParameters

CLI = Path(sys.executable).with_name("privsynth")
CONTRACT_OPTIONS = ("--input", "--schema", "--mechanism", "--epsilon", "--delta", "--rows", "--seed", "--output")
# Every RunParameters field is a `privsynth run` option (the flow's form and the command agree).
FIELD_OPTIONS = {"input": "--input", "schema_file": "--schema", "mechanism": "--mechanism", "epsilon": "--epsilon",
                 "delta": "--delta", "rows": "--rows", "seed": "--seed", "output": "--output", "sink": "--sink",
                 "dataset": "--dataset", "ledger": "--ledger", "mechanism_options": "--option",
                 "audit_target": "--audit-target", "audit_location": "--audit-location", "public_rows": "--public-rows",
                 "allow_seed_with_budget": "--allow-seed-with-budget", "unlimited": "--unlimited", "audit": "--audit",
                 "keep_private": "--keep-private", "credentials_block": "--credentials-block",
                 "fine_decoding": "--fine-decoding", "public": "--public", "public_model": "--public-model",
                 "discovery_share": "--discovery-share", "refuse_invalid_records": "--refuse-invalid-records",
                 "trust_data_derived": "--trust-data-derived-contracts"}


# A mechanism and row count fixed, so that the case reaches the check it is about.
FIXED = ("--mechanism", "reduced_space", "--rows", "10")


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as done:  # argparse: --help and usage errors
        code = done.code if isinstance(done.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privsynth: error: ") and "Traceback" not in err
    return lines[0]


@pytest.fixture
def ledger_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite'}"


def _mechanism_rows(out: str) -> list[str]:
    """The table rows of `privsynth mechanisms` (after the header and its rule, up to the blank line)."""
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["mechanism", "guarantee"] and set(lines[1].replace(" ", "")) == {"-"}
    return lines[2:lines.index("")]


def test_mechanisms_lists_every_mechanism_with_its_paper(capsys):
    from privsynth.mechanisms.catalogue import CATALOGUE
    from privsynth.run.parameters import DEFAULT_MECHANISM

    code, out, _ = _run(["mechanisms"], capsys)
    assert code == 0
    rows = _mechanism_rows(out)
    assert sorted(row.split()[0] for row in rows) == sorted(MECHANISM_MODULES)
    papers = {info.name: info.paper for info in CATALOGUE}
    for row in rows:
        assert row.rstrip().endswith(papers[row.split()[0]]), row  # each names its paper
    assert [row.split()[:2] for row in rows if "(default)" in row] == [[DEFAULT_MECHANISM, "(default)"]]
    assert out.strip().endswith("docs/mechanisms.md")


def test_installed_command_lists_mechanisms():
    done = subprocess.run([str(CLI), "mechanisms"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {row.split()[0] for row in _mechanism_rows(done.stdout)} == set(MECHANISM_MODULES)


def test_run_help_lists_every_contract_option(capsys):
    code, out, _ = _run(["run", "--help"], capsys)
    assert code == 0
    for option in CONTRACT_OPTIONS:
        assert f"{option} " in out, option
    assert set(FIELD_OPTIONS) == set(RunParameters.model_fields)
    for option in FIELD_OPTIONS.values():
        assert option in out, option


def test_budget_set_and_show_round_trip(ledger_url, capsys):
    code, out, _ = _run(["budget", "set", "adult", "--epsilon", "3", "--delta", "1e-6", "--ledger", ledger_url], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("adult"))
    assert row.split()[:5] == ["adult", "3", "1e-06", "0", "3"]

    BudgetLedger(ledger_url).charge("adult", "a" * 64, PrivacyCost.pure(0.5, "test release"), "test")
    code, out, _ = _run(["budget", "show", "adult", "--ledger", ledger_url], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("adult"))
    budget, delta, spent, remaining = row.split()[1:5]
    assert ((budget, delta) == ("3", "1e-06") and float(spent) == pytest.approx(0.5)
            and float(remaining) == pytest.approx(2.5))
    assert row.split()[-1] == "1"  # one charge

    # delta defaults to the delta runs use (1e-9), so every mechanism fits; --pure makes a pure-DP budget
    code, out, _ = _run(["budget", "set", "census", "--epsilon", "1", "--ledger", ledger_url], capsys)
    assert code == 0 and next(line for line in out.splitlines() if line.startswith("census")).split()[:3] == \
        ["census", "1", "1e-09"]
    code, out, _ = _run(["budget", "set", "survey", "--epsilon", "1", "--pure", "--ledger", ledger_url], capsys)
    assert code == 0 and next(line for line in out.splitlines() if line.startswith("survey")).split()[:3] == \
        ["survey", "1", "pure"]
    code, out, _ = _run(["budget", "show", "--ledger", ledger_url], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines() if line.startswith(("adult", "census", "survey"))] == \
        ["adult", "census", "survey"]
    assert out.strip().splitlines()[-1] == f"ledger: {ledger_url}"


def test_budget_show_of_an_empty_ledger(ledger_url, capsys):
    code, out, _ = _run(["budget", "show", "--ledger", ledger_url], capsys)
    assert code == 0 and out.strip().splitlines() == ["the ledger holds no budgets or charges", f"ledger: {ledger_url}"]


def test_budget_commands_default_to_the_per_user_ledger(isolated_privsynth_home, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(["budget", "set", "adult", "--epsilon", "2"], capsys)
    assert code == 0
    assert (isolated_privsynth_home / "ledger.sqlite").is_file() and not (tmp_path / "runs").exists()
    assert out.strip().splitlines()[-1] == f"ledger: sqlite:///{isolated_privsynth_home.resolve() / 'ledger.sqlite'}"


@pytest.mark.parametrize("argv, pattern", [
    (["run", "--epsilon", "abc"], r"argument --epsilon: invalid float value: 'abc' \(see 'privsynth run --help'\)$"),
    (["run", "--rows", "many"], r"argument --rows: invalid int value: 'many'"),
    (["run", "--bogus"], r"unrecognized arguments: --bogus"),
    (["run", "--epsilon", "0"], r"epsilon: Input should be greater than 0$"),
    (["run", "--epsilon", "nan"], r"epsilon: Input should be a finite number$"),
    (["run", "--delta", "1"], r"delta: Input should be less than 1$"),
    (["run", "--rows", "0"], r"rows: Input should be greater than or equal to 1$"),
    (["run", "--seed", "-1"], r"seed: Input should be greater than or equal to 0$"),
    (["run", "--mechanism", "magic"], r"mechanism: unknown mechanism 'magic'; expected one of \["),
    (["run", "--option", "points_per_statistic"], r"--option expects KEY=VALUE, got 'points_per_statistic'$"),
    (["run", "--mechanism", "reduced_space", "--option", "points_per_statistic=-1"],
     r"mechanism reduced_space option points_per_statistic: Input should be greater than 0$"),
    (["run", "--input", "table.xlsx", "--schema", "schemas/adult.yaml"], r"--input 'table.xlsx': expected a .csv"),
    (["run", "--input", "missing.csv", "--schema", "schemas/adult.yaml"], r"input file 'missing.csv' does not exist$"),
    (["run", "--input", "missing.csv"], r"input file 'missing.csv' does not exist$"),  # discovery needs the file too
    (["run", "--input", "t.csv", "--discovery-share", "0.95"], r"discovery_share"),
    (["run", "--schema", "nope.yaml"], r"schema file 'nope.yaml' does not exist$"),
    (["run", *FIXED, "--ledger", "not a url"], r"ledger: not a SQLAlchemy URL"),
    (["run", *FIXED, "--sink", "out.xlsx"],
     r"sink 'out.xlsx': expected duckdb:PATH\?table=NAME, postgresql\+psycopg://USER@HOST/DB\?table=NAME, "
                                                     r"another ibis backend URL with \?table=NAME, or a .parquet or "
                                                     r".csv path$"),
    (["run", *FIXED, "--audit-target", "nope"], r"audit_target 'nope' is not a kept column of schema 'adult'$"),
    (["run", *FIXED, "--audit-target", "age"], r"audit_target needs audit=True \(--audit\)"),
    (["run", "--public-rows", "0"], r"public_rows: Input should be greater than or equal to 1$"),
    pytest.param(["run", "--input", "postgresql://me:Zq7-SECRET@db/x?table=t", "--schema", "schemas/adult.yaml"],
                 r"^privsynth: error: input: the URL carries a password; .*\$\{PGPASSWORD\}"),
    pytest.param(["run", *FIXED, "--ledger", "postgresql://me:Zq7-SECRET@db/ledger"],
                 r"^privsynth: error: ledger: the URL carries a password"),
    pytest.param(["run", *FIXED, "--output", "../elsewhere"],
                 r"^privsynth: error: output: path '\.\./elsewhere' contains '\.\.'"),
    pytest.param(["run", *FIXED, "--sink", "duckdb:../w.duckdb?table=t"],
                 r"^privsynth: error: sink: path .* contains '\.\.'"),
    (["run", "--input", "postgresql://me:Zq7-SECRET@db/x?table=t", "--schema", "schemas/adult.yaml"],
     r"input: .*the URL carries a password; parameters are stored and shown"),
    (["run", *FIXED, "--ledger", "postgresql://me:Zq7-SECRET@db/ledger"], r"ledger: .*the URL carries a password"),
    (["run", *FIXED, "--output", "../elsewhere"], r"output: .*path '\.\./elsewhere' contains '\.\.'"),
    # A path the run reads may hold '..' (as --input may): a missing one is named, never refused for its '..'.
    (["run", *FIXED, "--schema", "../schemas/adult.yaml"], r"schema file '\.\./schemas/adult\.yaml' does not exist$"),
    (["budget", "set", "adult", "--epsilon", "1", "--delta", "1e-6", "--pure"],
     r"argument --pure: not allowed with argument --delta"),
    (["budget", "set", "adult", "--epsilon", "-1"], r"budget set: epsilon must be a finite number > 0, got -1.0$"),
    (["budget", "set", "adult", "--epsilon", "1", "--delta", "2"], r"budget set: delta must be None"),
    (["budget", "show", "nope"], r"the ledger has no budget or charge for dataset 'nope'"),
    (["budget", "show", "--ledger", "not a url"], r"ledger: not a SQLAlchemy URL"),
    ([], r"the following arguments are required: command"),
], ids=lambda v: (" ".join(v) or "(no command)") if isinstance(v, list) else None)
def test_bad_option_value_exits_2_with_one_clear_line(argv, pattern, ledger_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    if argv[:1] == ["budget"] and "--ledger" not in argv:
        argv = argv + ["--ledger", ledger_url]
    if argv[:1] == ["run"] and "--ledger" not in argv:
        argv = argv + ["--ledger", ledger_url]
    code, out, err = _run(argv, capsys)
    assert code == EXIT_USAGE, (out, err)
    line = _one_error_line(err)
    assert re.search(pattern, line), line
    assert "Zq7-SECRET" not in out + err  # a password is never echoed
    if argv[:1] == ["run"]:
        assert not (tmp_path / "ledger.sqlite").exists()  # refused before the ledger is opened


def test_installed_command_exits_2_with_one_line(tmp_path):
    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect-home"))
    done = subprocess.run([str(CLI), "run", "--epsilon", "-0.5", "--output", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert done.stderr == "privsynth: error: epsilon: Input should be greater than 0\n"
    assert done.stdout == "" and not (tmp_path / "run").exists()


def test_known_errors_lose_their_traceback_in_prefect_logs_others_keep_it():
    from flows.synthesize import ExpectedRefusalsOnOneLine
    from privsynth.privacy.ledger import BudgetNotSetError

    one_line = ExpectedRefusalsOnOneLine()

    def record(error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())

    for error in (InputError("input file 'x.csv' is empty"), BudgetNotSetError("dataset 'x' has no privacy budget")):
        # Dropped: the flow's `refused` logs a refusal once, as one WARNING line (issue 21: no ERROR task line).
        assert not one_line.filter(record(error))

    def finished(message: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, message, None, None)

    for refusal in ("Finished in state Failed('Task run encountered an exception ValidationFailedError: validation "
                    "failed, nothing was charged')", "Finished in state Failed('budget-not-set: dataset x has none')"):
        line = finished(refusal)
        assert one_line.filter(line) and line.levelno == logging.INFO and line.levelname == "INFO"
    crash = finished("Finished in state Failed('Task run encountered an exception RuntimeError: a bug')")
    assert one_line.filter(crash) and crash.levelname == "ERROR"
    unexpected = record(RuntimeError("a bug"))
    assert one_line.filter(unexpected) and unexpected.exc_info is not None and unexpected.levelname == "ERROR"
    assert "Traceback" in logging.Formatter().format(unexpected)
    for name in ("prefect.flow_runs", "prefect.task_runs"):  # installed where Prefect logs flow and task failures
        assert any(isinstance(f, ExpectedRefusalsOnOneLine) for f in logging.getLogger(name).filters)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("privsynth: error: ")]


def test_run_needs_a_budget_or_unlimited_and_prints_where_everything_went(harness, tmp_path, monkeypatch, capsys,
                                                                         caplog):
    import json

    import yaml
    from conftest import TOY_SCHEMA, toy_frame

    monkeypatch.chdir(tmp_path)
    toy_frame(200).to_csv(tmp_path / "toy.csv", index=False)
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    base = ["run", "--input", "toy.csv", "--schema", "toy.yaml", "--mechanism", "reduced_space", "--epsilon", "1",
            "--rows", "40", "--option", "points_per_statistic=1", "--ledger", ledger]

    # no budget and no --unlimited: refused in one line, nothing read, written or charged
    code, out, err = _run([*base, "--output", "refused"], capsys)
    assert code == EXIT_USAGE, err[-2000:]
    (line,) = _error_lines(err)
    assert "dataset 'toy' has no privacy budget" in line and "--unlimited" in line and "Traceback" not in err
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    assert BudgetLedger(ledger).status() == []

    # a budget and --seed: refused unless --allow-seed-with-budget
    assert _run(["budget", "set", "toy", "--epsilon", "3", "--ledger", ledger], capsys)[0] == 0
    code, out, err = _run([*base, "--seed", "7", "--output", "seeded"], capsys)
    assert code == EXIT_USAGE
    (line,) = _error_lines(err)
    assert "--allow-seed-with-budget" in line
    assert BudgetLedger(ledger).history("toy") == []

    # a budgeted run with the internal audit: one charge, public artifacts, the audit apart
    code, out, err = _run([*base, "--output", "run", "--audit"], capsys)
    assert code == 0, err[-3000:]
    assert "privsynth run" in out and "finished" in out and "privacy spent   : pure epsilon 1" in out
    assert "report.md" in out and "INTERNAL audit  : " in out and "internal-audit/audit.md" in out
    run = tmp_path / "run"
    assert (run / "internal-audit" / "audit.json").is_file() and (run / "report.md").is_file()
    assert not list(run.glob("raw*")) and "sha256" not in json.loads((run / "manifest.json").read_text())["input"]
    assert len(BudgetLedger(ledger).history("toy")) == 1

    # --unlimited on a dataset without a budget: allowed, and said so in the log
    code, out, err = _run([*base, "--dataset", "scratch", "--unlimited", "--output", "unlimited"], capsys)
    assert code == 0, err[-3000:]
    assert "WITHOUT A LIMIT" in out + err + caplog.text  # the run's log says so
    (status,) = BudgetLedger(ledger).status("scratch")
    assert status.epsilon is None and status.charges == 1


def _toy_run_arguments(tmp_path) -> list[str]:
    import yaml
    from conftest import TOY_SCHEMA, toy_frame

    toy_frame(200).to_csv(tmp_path / "toy.csv", index=False)
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    return ["run", "--input", str(tmp_path / "toy.csv"), "--schema", str(tmp_path / "toy.yaml"), "--mechanism",
            "reduced_space", "--epsilon", "1", "--rows", "40", "--option", "points_per_statistic=1", "--ledger",
            f"sqlite:///{tmp_path / 'ledger.sqlite'}", "--unlimited", "--seed", "3"]


def test_without_a_prefect_api_the_run_is_in_process_and_says_how_to_record_it(tmp_path, monkeypatch, capsys):
    import flows.synthesize
    import privsynth.cli as cli

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "no-prefect-home"))  # no profile with an API URL
    assert cli.prefect_api_url() is None

    def no_flow(*args, **kwargs):
        raise AssertionError("the flow ran although no Prefect API is configured")

    monkeypatch.setattr(flows.synthesize, "synthesize", no_flow)
    code, out, err = _run([*_toy_run_arguments(tmp_path), "--output", str(tmp_path / "run")], capsys)
    assert code == 0, err[-3000:]
    assert "no Prefect API configured" in out and "PREFECT_API_URL" in out and "Starting temporary server" not in err
    assert "Prefect" not in err  # said once, in the summary: an error is never preceded by it
    assert "validate: schema 'toy'" in err and "finished" in out
    assert (tmp_path / "run" / "synthetic.parquet").is_file()


def test_a_prefect_api_in_the_active_profile_counts_as_configured(tmp_path, monkeypatch):
    import privsynth.cli as cli

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    (tmp_path / "profiles.toml").write_text('active = "work"\n[profiles.work]\nPREFECT_API_URL = "http://h:4200/api"\n'
                                            '[profiles.local]\n')
    assert cli.prefect_api_url() == "http://h:4200/api"
    monkeypatch.setenv("PREFECT_PROFILE", "local")
    assert cli.prefect_api_url() is None
    monkeypatch.setenv("PREFECT_API_URL", "http://other/api")
    assert cli.prefect_api_url() == "http://other/api"


def test_with_a_prefect_api_the_run_is_the_flow(harness, tmp_path, monkeypatch, capsys):
    from prefect.settings import PREFECT_API_URL

    import flows.synthesize

    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())  # the harness's server, as a user would set it
    calls = []
    flow = flows.synthesize.synthesize
    monkeypatch.setattr(flows.synthesize, "synthesize", lambda *a, **k: calls.append(1) or flow(*a, **k))
    code, out, err = _run([*_toy_run_arguments(tmp_path), "--output", str(tmp_path / "run")], capsys)
    assert code == 0, err[-3000:]
    assert calls == [1] and "no Prefect API configured" not in err and "finished" in out


def test_credentials_blocks_need_a_prefect_server(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "no-prefect-home"))
    code, out, err = _run([*_toy_run_arguments(tmp_path), "--credentials-block", "db", "--output",
                           str(tmp_path / "run")], capsys)
    assert code == EXIT_USAGE and "needs a Prefect server" in _one_error_line(err)


def test_forecast_states_the_mechanisms_time_and_memory_before_anything_is_read(capsys):
    import json

    code, out, err = _run(["forecast", "--public-rows", "50000", "--json"], capsys)
    assert code == 0, err
    cost = json.loads(out)["cost"]
    assert cost["seconds"] > 0 and cost["memory_mb"] > 0 and "rounds" in cost["basis"]
    code, out, err = _run(["forecast", "--public-rows", "50000"], capsys)
    assert "time and memory of the mechanism: about" in out


def test_python_dash_m_privsynth_is_the_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "privsynth", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: privsynth")
    assert "run" in done.stdout and "schema" in done.stdout
