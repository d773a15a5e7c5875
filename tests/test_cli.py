"""The ``privsynth`` command: its options, the budget commands, and its error contract.

Errors in the input or parameters exit with status 2 and print one line that names what is wrong;
no traceback. Most tests call ``flows.cli.main`` in process; two run the installed entry point.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import EXIT_USAGE, _KnownErrorsOnOneLine, _known_errors, main
from privsynth.config import RunParameters
from privsynth.io import InputError
from privsynth.mechanisms import MECHANISM_MODULES
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.ledger import BudgetLedger

CLI = Path(sys.executable).with_name("privsynth")
CONTRACT_OPTIONS = ("--input", "--schema", "--mechanism", "--epsilon", "--delta", "--rows", "--seed", "--output")
# Every RunParameters field is a `privsynth run` option (the flow's form and the command agree).
FIELD_OPTIONS = {"input": "--input", "schema_file": "--schema", "mechanism": "--mechanism", "epsilon": "--epsilon",
                 "delta": "--delta", "rows": "--rows", "seed": "--seed", "output": "--output", "sink": "--sink",
                 "dataset": "--dataset", "ledger": "--ledger", "mechanism_options": "--option",
                 "audit_target": "--audit-target"}


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


def test_mechanisms_lists_every_mechanism_with_its_paper(capsys):
    code, out, _ = _run(["mechanisms"], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert [line.split()[0] for line in lines] == sorted(MECHANISM_MODULES)
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)  # each has a one-line summary


def test_installed_command_lists_mechanisms():
    done = subprocess.run([str(CLI), "mechanisms"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {line.split()[0] for line in done.stdout.splitlines()} == set(MECHANISM_MODULES)


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
    assert (budget, delta) == ("3", "1e-06") and float(spent) == pytest.approx(0.5) and float(remaining) == pytest.approx(2.5)
    assert row.split()[-1] == "1"  # one charge

    code, out, _ = _run(["budget", "set", "census", "--epsilon", "1", "--ledger", ledger_url], capsys)
    assert code == 0 and "pure" in next(line for line in out.splitlines() if line.startswith("census"))
    code, out, _ = _run(["budget", "show", "--ledger", ledger_url], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines() if line.startswith(("adult", "census"))] == ["adult", "census"]


def test_budget_show_of_an_empty_ledger(ledger_url, capsys):
    code, out, _ = _run(["budget", "show", "--ledger", ledger_url], capsys)
    assert code == 0 and out.strip() == "the ledger holds no budgets or charges"


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
    (["run", "--mechanism", "reduced_space", "--option", "points_per_statistic=-1"], r"mechanism reduced_space option points_per_statistic: Input should be greater than 0$"),
    (["run", "--input", "table.xlsx", "--schema", "schemas/adult.yaml"], r"--input 'table.xlsx': expected a .csv"),
    (["run", "--input", "missing.csv", "--schema", "schemas/adult.yaml"], r"input file 'missing.csv' does not exist$"),
    (["run", "--input", "missing.csv"], r"--schema is required with --input"),
    (["run", "--schema", "nope.yaml"], r"schema file 'nope.yaml' does not exist$"),
    (["run", *FIXED, "--ledger", "not a url"], r"ledger: not a SQLAlchemy URL"),
    (["run", *FIXED, "--sink", "out.xlsx"], r"sink 'out.xlsx': expected duckdb:PATH\?table=NAME, postgresql\+psycopg://USER@HOST/DB\?table=NAME, "
                                                     r"another ibis backend URL with \?table=NAME, or a .parquet or .csv path$"),
    (["run", *FIXED, "--audit-target", "nope"], r"audit_target 'nope' is not a kept column of schema 'adult'$"),
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
    one_line = _KnownErrorsOnOneLine(_known_errors())

    def record(error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())

    known = record(InputError("input file 'x.csv' is empty"))
    assert one_line.filter(known) and known.exc_info is None
    assert "Traceback" not in logging.Formatter().format(known)
    unexpected = record(RuntimeError("a bug"))
    assert one_line.filter(unexpected) and unexpected.exc_info is not None
    assert "Traceback" in logging.Formatter().format(unexpected)
