"""Issue 41: a newcomer's first hour. Every number and instruction the tool prints agrees with what it does.

1. one figure for what a run spent, on every surface, with its parts beside it;
2. budgets a person can read (what one more run may spend, and why epsilons do not subtract);
3. the dataset a run without --dataset charges is the one --help and the README name;
4. every suggestion the tool prints is a command or flag it accepts;
5. an in-process command stopped by SIGTERM leaves no state behind; test servers die with the test process;
7. the smaller points: round counts that do not move, '..' in read paths, no Prefect line before an error,
   a column-name typo named with its close match and no folder left holding only manifest.json.
(Point 6, the documents, is tests/test_docs.py.)
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from conftest import REPO, TOY_SCHEMA, toy_frame

from privsynth.cli import build_parser, main
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.ledger import BudgetLedger
from privsynth.privacy.spending import fits_budget, next_run_epsilon, rho_allowance
from privsynth.run.results import PrivacyRecord, RoundingFacts

DELTA = 1e-9


@contextmanager
def _environment(**values: str | None):
    saved = {k: os.environ.get(k) for k in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cli(argv: list[str], home: Path) -> tuple[int, str, str]:
    """`privsynth ARGV` in process, without a Prefect API, with its own per-user folder; (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with _environment(PREFECT_API_URL=None, PREFECT_PROFILE=None, PREFECT_HOME=str(home / "no-prefect"),
                      PRIVSYNTH_HOME=str(home / "privsynth")), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> dict:
    """A schema run and a no-schema run of the default mechanism, as a newcomer starts: their outputs."""
    tmp = tmp_path_factory.mktemp("newcomer")
    toy_frame(300).to_csv(tmp / "toy.csv", index=False)
    (tmp / "toy.yaml").write_text(yaml.safe_dump(TOY_SCHEMA))
    toy_frame(4000, seed=1).drop(columns="id").to_csv(tmp / "people.csv", index=False)
    ledger = f"sqlite:///{tmp / 'ledger.sqlite'}"
    runs = {}
    for name, argv in {
        "schema": ["run", "--input", str(tmp / "toy.csv"), "--schema", str(tmp / "toy.yaml"), "--epsilon", "0.3"],
        "no-schema": ["run", "--input", str(tmp / "people.csv"), "--epsilon", "1"],
    }.items():
        code, out, err = _cli([*argv, "--unlimited", "--seed", "3", "--ledger", ledger, "--output", str(tmp / name)],
                              tmp)
        assert code == 0, err[-3000:]
        runs[name] = {"out": out, "err": err, "dir": tmp / name}
    return {"tmp": tmp, "ledger": ledger, "runs": runs}


# ---------------------------------------------------------------- 1. one figure

@pytest.mark.parametrize("kind,dataset,epsilon", [("schema", "toy", 0.3), ("no-schema", "people", 1.0)])
def test_one_figure_for_what_a_run_spent_everywhere(newcomer, kind, dataset, epsilon):
    from types import SimpleNamespace

    from flows.synthesize import privacy_artifact_row

    run = newcomer["runs"][kind]
    privacy = json.loads((run["dir"] / "privacy.json").read_text())
    spent = privacy["spent"]
    assert list(privacy)[0] == "spent" and spent["epsilon"] == pytest.approx(epsilon, rel=1e-9)  # the first field
    console = re.search(r"privacy spent\s*: (.*)", run["out"]).group(1)
    assert console == spent["line"]
    headline = re.search(r"^- privacy: (.*)$", (run["dir"] / "report.md").read_text(), re.M).group(1)
    assert headline == spent["line"]
    manifest = json.loads((run["dir"] / "manifest.json").read_text())
    assert (manifest["privacy_spent"]["epsilon"] == spent["epsilon"]
            and manifest["epsilon_statement"] == spent["statement"])
    outcome = SimpleNamespace(privacy=PrivacyRecord.of(privacy), rounding=RoundingFacts(1, True), reused=False)
    row = privacy_artifact_row(outcome)  # what the Prefect privacy artifact shows
    assert row["epsilon"] == spent["epsilon"] and row["statement"] == spent["line"]
    # every epsilon the console states is the run's (its parts are shares of rho, never a second epsilon)
    stated = {float(x) for x in re.findall(r"epsilon (\d[\d.e-]*)", run["out"] + run["err"])}
    assert stated == {epsilon}, stated
    # the ledger counts the same figure for the run (a fresh dataset: the run is all it holds)
    code, out, _ = _cli(["budget", "show", dataset, "--ledger", newcomer["ledger"]], newcomer["tmp"])
    assert code == 0 and float(out.splitlines()[2].split()[3]) == pytest.approx(epsilon, rel=1e-5)
    # the parts: their rho adds up to the run's
    assert sum(p["rho_zcdp"] for p in spent["parts"]) == pytest.approx(spent["rho_zcdp"], rel=1e-9)
    if kind == "no-schema":
        assert [p["part"] for p in spent["parts"]] == ["discovery", "aim", "fine decoding"]
        assert "discovery" in console and "fine decoding" in console


# ---------------------------------------------------------------- 2. budgets a person can read

def test_budget_show_says_what_one_more_run_may_spend_and_why_epsilons_do_not_subtract(tmp_path):
    ledger_url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    ledger = BudgetLedger(ledger_url)
    ledger.set_budget("census", 3.0)
    ledger.charge("census", "big", PrivacyCost.zcdp(rho_allowance(2.8, DELTA), "earlier runs"))
    costs = [r.cost() for r in ledger.history("census")]
    status = ledger.status("census")[0]
    assert status.epsilon - status.spent_epsilon < 0.25  # "0.2 remains" would be the old reading
    most = next_run_epsilon(costs, 3.0, DELTA)
    assert most > 0.5  # a run at 0.5 fits, and the tool says so beforehand
    assert fits_budget([*costs, PrivacyCost.zcdp(rho_allowance(most * (1 - 1e-6), DELTA), "next")], 3.0, DELTA)
    assert not fits_budget([*costs, PrivacyCost.zcdp(rho_allowance(most * 1.001, DELTA), "next")], 3.0, DELTA)
    code, out, err = _cli(["budget", "show", "census", "--next-run", "0.5", "--ledger", ledger_url], tmp_path)
    assert code == 0, err
    assert "next run may spend eps" in out and f"{most:.6g}" in out
    assert "epsilons do not subtract" in out
    after = re.search(r"a run at epsilon 0.5 fits; after it, one more run may spend at most epsilon ([\d.]+)", out)
    ledger.charge("census", "half", PrivacyCost.zcdp(rho_allowance(0.5, DELTA), "the run at 0.5"))
    assert after and float(after.group(1)) == pytest.approx(ledger.status("census")[0].next_run_epsilon, rel=1e-5)
    code, out, _ = _cli(["budget", "show", "census", "--next-run", "2", "--ledger", ledger_url], tmp_path)
    assert "a run at epsilon 2 would be refused: one more run may spend at most epsilon" in out


def test_a_refusal_states_the_largest_epsilon_that_fits_and_why(tmp_path):
    from privsynth.errors import BudgetExceededError

    ledger = BudgetLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_budget("census", 1.0)
    ledger.charge("census", "a", PrivacyCost.zcdp(rho_allowance(0.9, DELTA), "earlier"))
    with pytest.raises(BudgetExceededError) as err:
        ledger.charge("census", "b", PrivacyCost.zcdp(rho_allowance(0.8, DELTA), "too much"))
    most = ledger.status("census")[0].next_run_epsilon
    assert f"one more run may spend at most epsilon {most:.6g}" in str(err.value)
    assert "epsilons do not subtract" in str(err.value)


# ---------------------------------------------------------------- 3. the dataset a run charges

def test_run_help_names_the_dataset_a_run_without_dataset_charges(tmp_path, capsys):
    from privsynth.run.parameters import parse_parameters
    from privsynth.run.plan import plan_run

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    example = re.search(r"without --schema, the input's file or table name: --input (\S+) charges dataset (\w+)", text)
    assert example, text
    source = tmp_path / example.group(1)
    source.parent.mkdir(parents=True)
    toy_frame(50).to_csv(source, index=False)
    assert plan_run(parse_parameters({"input": str(source)})).dataset == example.group(2)
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "without `--schema`, the input's file or table name" in readme


# ---------------------------------------------------------------- 4. every suggestion is accepted

def _flags(parser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _subparser(parser, *path: str):
    for name in path:
        sub = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
        parser = sub.choices[name]
    return parser


def test_every_suggestion_the_tool_prints_is_a_command_or_flag_it_accepts(newcomer, tmp_path):
    parser = build_parser()
    run_flags = _flags(_subparser(parser, "run"))
    texts = []
    for run in newcomer["runs"].values():
        texts += [run["out"], run["err"], (run["dir"] / "report.md").read_text()]
        if (run["dir"] / "schema.yaml").exists():
            texts.append((run["dir"] / "schema.yaml").read_text())
    # the refusals a newcomer meets first: no budget, then a budget too small
    people = str(newcomer["tmp"] / "people.csv")
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    code, _, refusal = _cli(["run", "--input", people, "--ledger", ledger], tmp_path)
    assert code == 2
    texts.append(refusal)
    commands = [c for text in texts for c in re.findall(r"`(privsynth [^`]+)`", text)]
    assert any(c.startswith("privsynth budget set people") for c in commands), commands
    for command in commands:
        words = [w.replace("DATASET", "people").replace("E", "1") if w in ("DATASET", "E") else w
                 for w in shlex.split(command.replace("[--delta D]", ""))[1:]]
        code, out, err = _cli([*words, "--ledger", ledger] if words[0] == "budget" else words + ["--help"], tmp_path)
        assert code == 0, (command, err)
    bare = {f for text in texts for f in re.findall(r"(?<![\w`-])(--[a-z][a-z-]+)", re.sub(r"`[^`]*`", "", text))}
    assert bare and bare <= run_flags, sorted(bare - run_flags)


# ---------------------------------------------------------------- 5. the test suite itself

def test_an_in_process_command_stopped_by_sigterm_leaves_no_state_behind(tmp_path, monkeypatch):
    """A timeout's SIGTERM during an in-process CLI test left the stop flag set: every later CLI test in the
    process then exited 143 ("assert 143 == 2"). Now the host's handler gets the signal back and nothing stays."""
    import privsynth.cli as cli

    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        def stopped(_args):
            os.kill(os.getpid(), signal.SIGTERM)
            return 0

        monkeypatch.setattr(cli, "command_mechanisms", stopped)
        assert main(["mechanisms"]) == 143
        assert seen == [signal.SIGTERM]  # handed back to the host (a test run stops, as its timeout wanted)
        assert signal.getsignal(signal.SIGTERM) is not cli._stop_on_sigterm and not cli._STOP["requested"]
        assert "PRIVSYNTH_CLI_RUN" not in os.environ
        code = main(["budget", "show", "nope", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"])
        assert code == 2  # a refusal is a refusal again, not "stopped by SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_processes_started_by_tests_die_with_the_test_process(tmp_path, how):
    """Ctrl-C (atexit kills the process group) or a SIGKILL of the test process (the child's parent-death
    signal): no server or worker is left running with no parent."""
    script = ("import sys, time; sys.path.insert(0, 'tests'); from prefect_server import popen_tied; "
              "p = popen_tied([sys.executable, '-c', 'import time; time.sleep(300)']); "
              "print(p.pid, flush=True); time.sleep(120)")
    host = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(host.stdout.readline())
    host.send_signal(signal.SIGINT if how == "interrupt" else signal.SIGKILL)
    host.wait(timeout=30)
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{child}/stat").is_file() and Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break  # a zombie, already dead
        import time

        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail(f"the process a test started outlived it ({how})")


# ---------------------------------------------------------------- 7. the smaller points

def test_aim_progress_lines_never_state_a_round_count_that_moves():
    from privsynth.mechanisms.aim.progress import RoundProgress

    lines = [RoundProgress("round", 1, 46, 0.1, ("a",), 1.0, 0.0, None).describe(),
             RoundProgress("round", 14, 22, 0.9, ("a", "b"), 1.0, 3.0, 1.0).describe(),
             RoundProgress("final_fit", 22, 22, 1.0, (), None, 4.0, 0.0).describe()]
    assert not any(re.search(r"\d+/\d+", line) for line in lines), lines
    assert "aim round 1: measured a (at most 45 more)" in lines[0] and "final fit after 22 rounds" in lines[2]


def test_read_paths_with_dotdot_are_treated_alike():
    from privsynth.errors import ParameterError
    from privsynth.run.parameters import parse_parameters

    parameters = parse_parameters({"input": "../x.csv", "schema_file": "../x.yaml"})
    assert parameters.schema_file == "../x.yaml"
    with pytest.raises(ParameterError, match="contains '..'"):
        parse_parameters({"output": "../runs/x"})  # where a run writes may not climb out


def test_an_error_is_one_line_with_no_prefect_line_before_it(tmp_path):
    toy_frame(50).drop(columns="id").to_csv(tmp_path / "people.csv", index=False)
    code, out, err = _cli(["run", "--input", str(tmp_path / "people.csv"), "--ledger",
                           f"sqlite:///{tmp_path / 'l.sqlite'}"], tmp_path)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and err.startswith("privsynth: error: dataset 'people' has no privacy budget")


def test_a_column_name_typo_names_the_close_match_and_leaves_no_folder(tmp_path):
    schema = json.loads(json.dumps(TOY_SCHEMA))
    schema["columns"][3]["name"] = "weigth"  # a typo in the schema
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(schema))
    toy_frame(50).to_csv(tmp_path / "toy.csv", index=False)
    code, _, err = _cli(["run", "--input", str(tmp_path / "toy.csv"), "--schema", str(tmp_path / "toy.yaml"),
                         "--unlimited", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}", "--output",
                         str(tmp_path / "run")], tmp_path)
    assert code == 2 and "missing column(s) ['weigth'] (did you mean 'weight' for 'weigth'?" in err, err
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_a_pure_runs_parts_are_shares_of_its_epsilon_which_add():
    """Pure parts add in epsilon, not in rho (epsilon^2 / 2): fine decoding's 5% of a pure run reads 5%, not 0%."""
    from privsynth.run.spent import SpentPart, run_spend

    charge = PrivacyCost.pure(1.0, "reduced_space with fine decoding")
    spend = run_spend([("reduced_space", charge)], DELTA, {"reduced_space": [
        SpentPart("reduced_space", 0.95 ** 2 / 2, 0.95), SpentPart("fine decoding", 0.05 ** 2 / 2, 0.05)]})
    assert spend.epsilon == pytest.approx(1.0) and spend.pure_epsilon == pytest.approx(1.0)
    assert spend.line().endswith("(parts of the pure epsilon: reduced_space 95%, fine decoding 5%)")


def test_sigterm_target_starts_a_server_and_waits():
    """Not a test of its own: the test run that the next test stops with SIGTERM."""
    target = os.environ.get("PRIVSYNTH_SIGTERM_TARGET")
    if not target:
        pytest.skip("run only by test_a_sigterm_stops_the_test_run_and_its_servers")
    from prefect_server import popen_tied

    child = popen_tied([sys.executable, "-c", "import time; time.sleep(300)"])
    Path(target).write_text(str(child.pid))
    import time

    time.sleep(120)


def test_a_sigterm_stops_the_test_run_and_its_servers(tmp_path):
    """The README's test command stopped by a timeout's SIGTERM: the run ends (no later test runs) and the
    process a test started dies with it."""
    import time

    marker = tmp_path / "child.pid"
    env = {**os.environ, "PRIVSYNTH_SIGTERM_TARGET": str(marker)}
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
                            "tests/test_newcomer.py::test_sigterm_target_starts_a_server_and_waits",
                            "tests/test_newcomer.py::test_read_paths_with_dotdot_are_treated_alike"],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not marker.is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.is_file(), "the target test never started"
    child = int(marker.read_text())
    run.send_signal(signal.SIGTERM)
    out, _ = run.communicate(timeout=60)
    assert run.returncode != 0 and "passed" not in out.splitlines()[-1], out[-2000:]  # the later test never ran
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{child}/stat").is_file() and Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("a process the stopped test run started outlived it")
