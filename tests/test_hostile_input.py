"""Hostile input: every bad file, schema or parameter is refused with a clear, value-free message.

For each case the suite checks that the error names what is wrong (file, column or parameter) and
what was expected, that no raw cell value (a distinctive secret planted in the bad cells, or in a
URL's password) appears in the message, the logs or any artifact, that nothing is charged in the
budget ledger, that no release is stored, that no private intermediate (the typed rows, the
histogram: they live in a private temporary folder) of the failed run is left behind, and that an
existing output folder of another run is untouched.

The messages are checked fast at the library level (``prepare_run`` + ``execute`` with the direct
runner: the one code path the flow, the CLI and ``privsynth.synthesize`` share); the flow-level
guarantees run every case under prefect_test_harness (the full parametrisation is marked slow, a
representative subset runs by default); a few CLI cases run in a subprocess to check exit status 2
and the one-line message.

Where a case is refused: "plan" (the parameters, schema and limits, before any folder is written
or the ledger opened), "budget" (the ledger's pre-check, before the run folder is written or the
data opened), "read" (reading the input, in the validate stage), "validate" (the schema's
expectations; validation.json says which failed). delta >= 1/n is refused at "plan" against a declared
--public-rows only: n itself is private, and a refusal on the exact n would be an oracle for it.

A one-row table is a legitimate input: the DP guarantee is about neighbouring tables and holds for
any n, so it is released like any other (its synthetic rows carry essentially no signal); a delta
that is not below 1/n is warned about in privacy.json from the DP estimate of n, never refused on n.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import TOY_SCHEMA, private_leftovers

from privsynth.engine.datasource import ValidationFailedError
from privsynth.io import InputError
from privsynth.io.credentials import CredentialError
from privsynth.privacy.ledger import (
    BudgetExceededError,
    BudgetLedger,
    BudgetNotSetError,
    NoiseAlreadyDrawnError,
    UnknownDatasetError,
)
from privsynth.run.context import direct
from privsynth.run.parameters import ParameterError, parse_parameters
from privsynth.run.plan import check_delta_against_public_rows
from privsynth.run.prepare import prepare_run
from privsynth.run.runfolder import RunFolder, RunFolderError
from privsynth.run.stages import execute
from privsynth.schema import SchemaError
from privsynth.schema.limits import LimitError

REPO = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).with_name("privsynth")

SECRET_TEXT = "Zq7-SECRET-hunter2"
SECRET_NUMBER = "987654.321"
SECRETS = (SECRET_TEXT, SECRET_NUMBER, "987654")

SCHEMA = TOY_SCHEMA
N_ROWS = 40


def good_frame(n: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"id": np.arange(n), "colour": rng.choice(["red", "green", "blue"], size=n),
                         "size": rng.integers(0, 101, n), "weight": rng.uniform(0, 1, n).round(3),
                         "member": rng.random(n) < 0.5})


def _csv(tmp: Path, frame: pd.DataFrame, name: str = "data.csv") -> Path:
    path = tmp / name
    frame.to_csv(path, index=False)
    return path


def _schema(tmp: Path, schema: dict | None = None) -> Path:
    path = tmp / "schema.yaml"
    path.write_text(yaml.safe_dump(schema or SCHEMA))
    return path


# ---------------------------------------------------------------- the cases
# Each builder writes its input into tmp and returns parameter overrides. Bad cells hold a secret.

def _empty_file(tmp):
    (tmp / "data.csv").write_bytes(b"")
    return {}


def _header_only(tmp):
    (tmp / "data.csv").write_text("id,colour,size,weight,member\n")
    return {}


def _wrong_delimiter(tmp):
    good_frame().to_csv(tmp / "data.csv", index=False, sep=";")
    return {}


def _non_utf8(tmp):
    text = good_frame().to_csv(index=False).encode()
    lines = text.split(b"\n")
    lines[5] = lines[5].replace(b"red", b"r\xe9d").replace(b"green", b"gr\xe9en").replace(b"blue", b"bl\xfce")
    (tmp / "data.csv").write_bytes(b"\n".join(lines))
    return {}


def _missing_column(tmp):
    _csv(tmp, good_frame().drop(columns=["weight"]))
    return {}


def _unexpected_column(tmp):
    frame = good_frame()
    frame["ssn"] = SECRET_TEXT
    _csv(tmp, frame)
    return {}


def _wrong_type(tmp):
    frame = good_frame().astype({"size": object})
    frame.loc[7, "size"] = SECRET_TEXT
    _csv(tmp, frame)
    return {}


def _out_of_domain_category(tmp):
    frame = good_frame()
    frame.loc[3, "colour"] = SECRET_TEXT
    _csv(tmp, frame)
    return {}


def _out_of_domain_number(tmp):
    frame = good_frame()
    frame.loc[3, "weight"] = float(SECRET_NUMBER)
    _csv(tmp, frame)
    return {}


def _all_null_column(tmp):
    frame = good_frame()
    frame["colour"] = None
    _csv(tmp, frame)
    return {}


def _nan_in_numeric(tmp):
    frame = good_frame().astype({"weight": object})
    frame.loc[2, "weight"] = "NaN"
    _csv(tmp, frame)
    return {}


def _inf_in_numeric(tmp):
    frame = good_frame().astype({"weight": object})
    frame.loc[2, "weight"] = "inf"
    _csv(tmp, frame)
    return {}


def _duplicate_columns(tmp):
    text = good_frame().to_csv(index=False)
    header, rest = text.split("\n", 1)
    (tmp / "data.csv").write_text(header.replace("member", "weight") + "\n" + rest)
    return {}


def _duplicate_columns_parquet(tmp):
    frame = good_frame()
    arrays = [pa.array(frame[c]) for c in frame.columns] + [pa.array(frame["size"])]
    path = tmp / "data.parquet"
    pq.write_table(pa.Table.from_arrays(arrays, names=[*frame.columns, "size"]), path)
    return {"input": str(path)}


def _no_header_row(tmp):
    """The first row is data; its repeated secret must not be quoted as a "column name"."""
    frame = good_frame().astype({"colour": object, "member": object})
    frame.loc[0, "colour"] = SECRET_TEXT
    frame.loc[0, "member"] = SECRET_TEXT
    frame.to_csv(tmp / "data.csv", index=False, header=False)
    return {}


def _truncated_parquet(tmp):
    path = tmp / "data.parquet"
    frame = good_frame(2000)
    frame.loc[3, "colour"] = SECRET_TEXT
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return {"input": str(path)}


def _contradictory_schema(tmp):
    _csv(tmp, good_frame())
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"][3]["bins"] = [0.0, 0.5, 2.0]  # the last edge contradicts the bounds [0, 1]
    _schema(tmp, schema)
    return {}


def _good(**overrides):
    def build(tmp):
        _csv(tmp, good_frame())
        return overrides
    return build


def _delta_too_large(tmp):
    _csv(tmp, good_frame())
    return {"delta": 0.05, "public_rows": 40}  # the declared 1/n = 0.025


def _unwritable_output(tmp):
    _csv(tmp, good_frame())
    (tmp / "a-file").write_text("not a folder")
    return {"output": str(tmp / "a-file" / "run")}


def _too_many_levels(tmp):
    _csv(tmp, good_frame())
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"][1]["categories"] = ["red", "green", "blue"] + [f"c{i}" for i in range(2_500)]
    _schema(tmp, schema)
    return {}


def _too_many_columns(tmp):
    _csv(tmp, good_frame())
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"] += [{"name": f"x{i}", "type": "boolean"} for i in range(500)]
    _schema(tmp, schema)
    return {}


def _budgeted(epsilon: float, **overrides):
    """The toy dataset has a budget (the default path: no --unlimited)."""
    def build(tmp):
        _csv(tmp, good_frame())
        BudgetLedger(f"sqlite:///{tmp / 'ledger.sqlite'}").set_budget("toy", epsilon)
        return {"unlimited": False, **overrides}
    return build


PASSWORD_URL = f"postgresql+psycopg://analyst:{SECRET_TEXT}@db.example/warehouse"


# (id, builder, error type, message pattern, stage that refuses it)
CASES = [
    ("empty file", _empty_file, InputError, r"input file '.*data\.csv' is empty \(0 bytes\); expected a header row",
     "read"),
    ("header only", _header_only, ValidationFailedError, r"table: 0 rows; expected at least one", "validate"),
    ("wrong delimiter", _wrong_delimiter, InputError, r"data\.csv': the header has one column but contains ';'; "
                                                      r"expected ','-delimited columns \['id', 'colour'", "read"),
    ("non-UTF-8 bytes", _non_utf8, InputError, r"data\.csv' is not UTF-8 text", "read"),
    ("missing column", _missing_column, InputError,
     r"data\.csv: missing column\(s\) \['weight'\]; the schema 'toy' expects", "read"),
    ("unexpected column", _unexpected_column, ValidationFailedError,
     r"unexpected column\(s\) \['ssn'\]; expected exactly "
                                                                     r"the schema's 5 columns", "validate"),
    ("wrong type", _wrong_type, ValidationFailedError,
     r"column 'size': some value\(s\) are not numbers; expected integer values", "validate"),
    ("out-of-domain category", _out_of_domain_category, ValidationFailedError,
     r"column 'colour': some value\(s\) not among the schema's 3 categories", "validate"),
    ("out-of-domain number", _out_of_domain_number, ValidationFailedError,
     r"column 'weight': some value\(s\) outside \[0, 1\]", "validate"),
    ("all-null column", _all_null_column, ValidationFailedError, r"column 'colour': every value is missing",
     "validate"),
    ("NaN in numeric column", _nan_in_numeric, ValidationFailedError,
     r"column 'weight': some missing value\(s\) \(null/NaN\) but the column is not nullable", "validate"),
    ("inf in numeric column", _inf_in_numeric, ValidationFailedError,
     r"column 'weight': some value\(s\) are \+inf or -inf; numeric values must be finite", "validate"),
    ("duplicate column names", _duplicate_columns, InputError, r"data\.csv': duplicate column name\(s\) \['weight'\]",
     "read"),
    ("duplicate column names (Parquet)", _duplicate_columns_parquet, InputError,
     r"data\.parquet': duplicate column name\(s\) \['size'\]", "read"),
    ("no header row", _no_header_row, InputError, r"data\.csv': duplicate column name\(s\) 1 \(names withheld: "
                                                  r"not schema columns\); expected each of \['id', 'colour'", "read"),
    ("truncated Parquet", _truncated_parquet, InputError, r"data\.parquet' is not a readable Parquet file", "read"),
    ("self-contradicting schema", _contradictory_schema, SchemaError,
     r"schema\.yaml: column 'weight': the first and last bin edges must equal the bounds \[0\.0, 1\.0\]", "plan"),
    ("epsilon = 0", _good(epsilon=0), ParameterError, r"^epsilon: Input should be greater than 0$", "plan"),
    ("epsilon < 0", _good(epsilon=-1.0), ParameterError, r"^epsilon: Input should be greater than 0$", "plan"),
    ("epsilon not a number", _good(epsilon="abc"), ParameterError, r"^epsilon: Input should be a valid number", "plan"),
    ("epsilon NaN", _good(epsilon=float("nan")), ParameterError, r"^epsilon: Input should be a finite number$", "plan"),
    ("delta >= 1", _good(delta=1.0), ParameterError, r"^delta: Input should be less than 1$", "plan"),
    ("delta >= 1/n", _delta_too_large, ParameterError,
     r"^delta 0\.05 is not below 1/n for the declared --public-rows 40", "plan"),
    ("rows = 0", _good(rows=0), ParameterError, r"^rows: Input should be greater than or equal to 1$", "plan"),
    ("rows < 0", _good(rows=-5), ParameterError, r"^rows: Input should be greater than or equal to 1$", "plan"),
    ("unknown mechanism", _good(mechanism="magic"), ParameterError,
     r"^mechanism: unknown mechanism 'magic'; expected one of \['aim', 'microaggregation', 'private_sampling', 'rap', "
     r"'reduced_space'\]$", "plan"),
    ("unknown mechanism option", _good(mechanism_options={"bogus": 1}), ParameterError,
     r"^mechanism reduced_space option bogus: Extra inputs are not permitted$", "plan"),
    ("output folder cannot be written", _unwritable_output, InputError,
     r"^output folder '.*a-file/run' cannot be written \(Not a directory\)$", "plan"),
    ("password in the input URL", _good(input=f"{PASSWORD_URL}?table=people"), ParameterError,
     r"^input: .*the URL carries a password; .*reference to an environment variable", "plan"),
    ("password in the ledger URL", _good(ledger=PASSWORD_URL), ParameterError,
     r"^ledger: .*the URL carries a password", "plan"),
    ("password in the sink URL", _good(sink=f"{PASSWORD_URL}?table=synthetic"), ParameterError,
     r"^sink: .*the URL carries a password", "plan"),
    ("output path climbs out", _good(output="../../escaped-run"), ParameterError,
     r"^output: .*path '\.\./\.\./escaped-run' contains '\.\.'", "plan"),
    ("sink path climbs out", _good(sink="../escaped.parquet"), ParameterError, r"^sink: .*contains '\.\.'", "plan"),
    ("too many levels in a column", _too_many_levels, LimitError,
     r"^column 'colour' has \d+ levels; the limit is 2000 \(PRIVSYNTH_MAX_LEVELS\)", "plan"),
    ("too many columns in the schema", _too_many_columns, LimitError,
     r"^schema 'toy' keeps 504 columns; the limit is 500 \(PRIVSYNTH_MAX_COLUMNS\)", "plan"),
    ("no budget and not unlimited", _good(unlimited=False), BudgetNotSetError,
     r"^dataset 'toy' has no privacy budget; set one with `privsynth budget set toy --epsilon E` or spend without "
     r"a limit explicitly with --unlimited \(nothing was read or charged\)$", "budget"),
    ("budget exceeded", _budgeted(0.5, seed=None), BudgetExceededError,
     r"^dataset 'toy': this run needs epsilon 1 but one more run may spend at most epsilon 0\.5 \(budget 0\.5, spent "
     r"0; epsilons do not subtract: .*\); nothing was read or charged$",
     "budget"),
    ("seed on a budgeted dataset", _budgeted(3.0), BudgetNotSetError,
     r"^dataset 'toy' has a privacy budget and --seed was given: .*--allow-seed-with-budget", "budget"),
]
CASE_IDS = [c[0].replace(" ", "-") for c in CASES]
# One case per refusing stage (and per kind of guarantee) for the default flow-level run.
FAST_FLOW_CASES = ("wrong delimiter", "unexpected column", "out-of-domain category", "delta >= 1/n", "epsilon < 0",
                   "password in the input URL", "budget exceeded")


def _values(tmp: Path, overrides: dict) -> dict:
    values = {"input": str(tmp / "data.csv"), "schema_file": str(tmp / "schema.yaml"), "mechanism": "reduced_space",
              "epsilon": 1.0, "rows": 20, "seed": 5, "output": str(tmp / "run"),
              "ledger": f"sqlite:///{tmp / 'ledger.sqlite'}", "unlimited": True,
              "mechanism_options": {"points_per_statistic": 1.0},
              # The refusal of a failing record is the owner's explicit option (issue 36.3): these cases test it.
              "refuse_invalid_records": True}
    values.update(overrides)
    return values


def _build(case, tmp: Path) -> dict:
    _, builder, *_ = case
    if not (tmp / "schema.yaml").exists():
        _schema(tmp)
    overrides = builder(tmp)
    if not (tmp / "schema.yaml").exists():
        _schema(tmp)
    return _values(tmp, overrides)


def _run_direct(values: dict, store: Path) -> None:
    """The run as privsynth.synthesize runs it: the one orchestration, each stage a plain call."""
    execute(prepare_run(parse_parameters(values), release_store=str(store)), direct)





def _check_run_folder(run: Path, stage: str, name: str) -> None:
    """What a refused run may leave in its folder: public artifacts of the stages before the refusal."""
    if stage == "plan":
        assert not run.exists(), f"{name}: refused before any folder is made"
        return
    if stage == "budget":
        assert not run.exists() or not any(run.iterdir()), f"{name}: refused before the run folder is written"
        return
    if stage == "read":  # refused before any stage finished: no folder holding only manifest.json is left
        assert not run.exists() or not any(run.iterdir()), f"{name}: {sorted(p.name for p in run.iterdir())}"
        return
    names = {p.name for p in run.iterdir()}
    allowed = {"manifest.json", "validation.json", "internal-validation"}  # the exact report: owner-only
    assert names <= allowed, f"{name}: {sorted(names - allowed)} left in the run folder"
    manifest = json.loads((run / "manifest.json").read_text())
    assert "mechanism" not in manifest["stages"] and "finished" not in manifest
    if stage == "read":
        assert "validation.json" not in names
    if stage == "validate":
        assert manifest["stages"]["validate"]["success"] is False
        assert json.loads((run / "validation.json").read_text())["success"] is False


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into {where}"


# ---------------------------------------------------------------- library level (fast)

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_case_is_refused_with_a_clear_value_free_message(case, tmp_path, private_tmp, monkeypatch):
    name, _, error, pattern, stage = case
    monkeypatch.chdir(tmp_path)
    values = _build(case, tmp_path)
    store = tmp_path / "releases"
    with pytest.raises(error) as info:
        _run_direct(values, store)
    message = str(info.value)
    assert "\n" not in message.strip()
    assert re.search(pattern, message), f"{name}: {message!r} does not match {pattern!r}"
    _no_secret(message, f"the error of {name!r}")
    _check_run_folder(tmp_path / "run", stage, name)
    assert private_leftovers(private_tmp) == [], f"{name}: private intermediates left behind"
    assert not store.exists() or not any(store.iterdir())
    if stage == "plan":
        assert not (tmp_path / "ledger.sqlite").exists()  # refused before the ledger is opened
    if not values["ledger"].startswith("postgresql"):
        _assert_nothing_charged(values["ledger"])
    run = tmp_path / "run"
    assert not list(run.glob(".*.tmp")) if run.exists() else True
    _no_secret(_files_text(run), "the run folder")


def test_a_too_wide_input_header_is_refused_before_the_rows_are_read(tmp_path, private_tmp, monkeypatch):
    """limits.py documents PRIVSYNTH_MAX_INPUT_COLUMNS (the header's width, read before anything else)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIVSYNTH_MAX_INPUT_COLUMNS", "50")
    _schema(tmp_path)
    frame = good_frame()
    for i in range(60):
        frame[f"extra_{i}"] = SECRET_TEXT
    _csv(tmp_path, frame)
    values = _values(tmp_path, {})
    with pytest.raises(Exception) as info:
        _run_direct(values, tmp_path / "releases")
    _no_secret(str(info.value), "the error")
    _no_secret(_files_text(tmp_path / "run"), "the run folder")
    assert private_leftovers(private_tmp) == []
    _assert_nothing_charged(values["ledger"])
    assert isinstance(info.value, LimitError)
    assert "PRIVSYNTH_MAX_INPUT_COLUMNS" in str(info.value) and not (tmp_path / "run" / "validation.json").exists()


def test_delta_is_checked_against_the_declared_public_rows_only():
    check_delta_against_public_rows(0.05, None)  # no public n: nothing to check against (n is private)
    check_delta_against_public_rows(0.01, 99)  # 0.01 < 1/99: accepted
    with pytest.raises(ParameterError, match="--public-rows 100"):
        check_delta_against_public_rows(0.01, 100)  # delta = 1/n exactly is refused


# ---------------------------------------------------------------- flow level: nothing charged, stored, kept or lost

class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def prefect_logs():
    """Every Prefect flow/task log line of the test, tracebacks included."""
    import flows.synthesize  # noqa: F401  (configures Prefect's logging first; it would drop a handler added before)

    handler = _Lines()
    logger = logging.getLogger("prefect")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def _other_run(tmp: Path) -> Path:
    """An output folder holding another, finished run (with its release)."""
    folder = RunFolder.open(tmp / "other-run", {"input": "elsewhere.csv"}, "other")
    pq.write_table(pa.table({"colour": ["red", "blue"]}), folder.file("release.parquet"))
    folder.record("mechanism", ["release.parquet"])
    pq.write_table(pa.table({"colour": ["red", "blue"]}), folder.file("synthetic.parquet"))
    folder.record("rounding", ["synthetic.parquet"])
    folder.file("internal-audit").mkdir()
    (folder.file("internal-audit") / "audit.json").write_text("{}")
    folder.manifest["finished"] = "2026-01-01T00:00:00+0000"
    folder.save()
    return folder.path


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _assert_nothing_charged(ledger_url: str) -> None:
    try:
        assert BudgetLedger(ledger_url).history("toy") == []
    except UnknownDatasetError:
        pass


def _files_text(folder: Path) -> str:
    if not folder.exists():
        return ""
    return "\n".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


FLOW_PARAMS = [pytest.param(c, id=i, marks=() if c[0] in FAST_FLOW_CASES else pytest.mark.slow)
               for c, i in zip(CASES, CASE_IDS)]


@pytest.mark.parametrize("case", FLOW_PARAMS)
def test_flow_refuses_case_without_charge_release_orprivate_leftovers(case, harness, prefect_logs, tmp_path,
                                                                         private_tmp, monkeypatch):
    from flows.synthesize import synthesize

    name, _, error, pattern, stage = case
    monkeypatch.chdir(tmp_path)
    values = _build(case, tmp_path)
    other = _other_run(tmp_path)
    before = _snapshot(other)
    store = tmp_path / "releases"
    with pytest.raises(error) as info:
        synthesize(parse_parameters(values), release_store=str(store))
    message = str(info.value)
    assert re.search(pattern, message), f"{name}: {message!r}"
    assert "\n" not in message

    if not values["ledger"].startswith("postgresql"):
        _assert_nothing_charged(values["ledger"])
    assert not store.exists() or not any(store.iterdir())
    run = tmp_path / "run"
    _check_run_folder(run, stage, name)
    assert private_leftovers(private_tmp) == [], f"{name}: private intermediates left behind"
    assert not list(run.glob(".*.tmp")) if run.exists() else True
    assert _snapshot(other) == before

    _no_secret(message, "the error")
    if stage in ("read", "validate", "budget"):
        # the refusal reached Prefect's logs as one WARNING line, without a traceback
        refusals = [line for line in prefect_logs if "refused (" in line]
        assert refusals and all(line.startswith("WARNING") for line in refusals), prefect_logs[-5:]
        assert not any("Traceback" in line for line in prefect_logs)
    _no_secret("\n".join(prefect_logs), "the logs")
    _no_secret(_files_text(run), "the run folder")
    assert not any("Retry" in line for line in prefect_logs), "a bad input is not retried"


def test_only_transient_failures_are_retried():
    from prefect.states import Failed

    from privsynth.run.faults import InjectedFault
    from tasks.common import retry_transient_only

    def retried(error: BaseException) -> bool:
        return retry_transient_only(None, None, Failed(data=error))  # a failed task run's state, as Prefect passes it

    assert retried(OSError("network file system hiccup")) and retried(TimeoutError())
    for error in (InputError("x"), ParameterError("x"), SchemaError("x"), ValidationFailedError("x"),
                  RunFolderError("x"), LimitError("x"), CredentialError("x"), BudgetNotSetError("x"),
                  BudgetExceededError("x"), NoiseAlreadyDrawnError("x"), InjectedFault("x")):
        assert not retried(error), type(error).__name__


def test_an_existing_run_folder_of_another_run_is_refused_and_untouched(harness, tmp_path):
    from flows.synthesize import synthesize

    values = _build(CASES[0], tmp_path) | {"input": str(_csv(tmp_path, good_frame()))}
    other = _other_run(tmp_path)
    before = _snapshot(other)
    with pytest.raises(RunFolderError,
                       match=r"output folder '.*other-run' holds a different run \(other\) with a release"):
        synthesize(parse_parameters(values | {"output": str(other)}), release_store=str(tmp_path / "releases"))
    assert _snapshot(other) == before

    stranger = tmp_path / "photos"
    stranger.mkdir()
    (stranger / "holiday.jpg").write_bytes(b"\xff\xd8 not really")
    with pytest.raises(RunFolderError, match="is not empty and holds no privsynth run"):
        synthesize(parse_parameters(values | {"output": str(stranger)}), release_store=str(tmp_path / "releases"))
    assert [p.name for p in stranger.iterdir()] == ["holiday.jpg"]
    _assert_nothing_charged(values["ledger"])


def test_a_one_row_table_is_released_like_any_other(harness, tmp_path, private_tmp):
    """n = 1 is a legitimate table: the guarantee holds (it is about neighbours), the output is mostly noise."""
    from flows.synthesize import synthesize

    _schema(tmp_path)
    _csv(tmp_path, good_frame(1))
    values = _values(tmp_path, {"rows": 5})
    result = synthesize(parse_parameters(values), release_store=str(tmp_path / "releases"))
    synthetic = pq.read_table(result["synthetic"]).to_pandas()
    assert len(synthetic) == 5 and list(synthetic.columns) == ["colour", "size", "weight", "member"]
    assert len(BudgetLedger(values["ledger"]).history("toy")) == 1
    assert result["privacy"]["pure_epsilon"] == pytest.approx(1.0)
    # delta = 0.5 = 1/n on a two-row table is refused only when n = 2 is declared public, before the data.
    _csv(tmp_path, good_frame(2))
    with pytest.raises(ParameterError, match=r"^delta 0\.5 is not below 1/n for the declared --public-rows 2"):
        synthesize(parse_parameters(values | {"delta": 0.5, "public_rows": 2, "output": str(tmp_path / "run2")}),
                   release_store=str(tmp_path / "releases"))
    assert not (tmp_path / "run2").exists()
    assert len(BudgetLedger(values["ledger"]).history("toy")) == 1
    assert private_leftovers(private_tmp) == []


# ---------------------------------------------------------------- the command line

def _cli(args: list[str], tmp: Path, api_url: str | None = None) -> subprocess.CompletedProcess:
    (tmp / "system-tmp").mkdir(exist_ok=True)
    env = dict(os.environ, PREFECT_HOME=str(tmp / "prefect-home"), PRIVSYNTH_RELEASE_STORE=str(tmp / "releases"),
               GX_ANALYTICS_ENABLED="false", PREFECT_SERVER_ANALYTICS_ENABLED="false", TMPDIR=str(tmp / "system-tmp"))
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return subprocess.run([str(CLI), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def _cli_args(values: dict) -> list[str]:
    args = ["run", "--input", values["input"], "--schema", values["schema_file"], "--mechanism", values["mechanism"],
            "--epsilon", str(values["epsilon"]),
            "--rows", str(values["rows"]), "--output", values["output"],
            "--ledger", values["ledger"], "--option", "points_per_statistic=1"]
    if values.get("seed") is not None:
        args += ["--seed", str(values["seed"])]
    if values.get("unlimited"):
        args.append("--unlimited")
    if values.get("refuse_invalid_records"):
        args.append("--refuse-invalid-records")
    if "delta" in values:
        args += ["--delta", str(values["delta"])]
    if values.get("public_rows") is not None:
        args += ["--public-rows", str(values["public_rows"])]
    return args


def _assert_one_line_error(done: subprocess.CompletedProcess, pattern: str) -> str:
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("privsynth: error: ")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert done.stderr.rstrip().splitlines()[-1] == errors[0] or "Stopping temporary server" in done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert re.search(pattern, errors[0]), errors[0]
    return errors[0]


@pytest.mark.parametrize("overrides, builder, pattern", [
    (["--epsilon", "-1"], _good(), r"^privsynth: error: epsilon: Input should be greater than 0$"),
    ([], _contradictory_schema, r"^privsynth: error: .*schema\.yaml: column 'weight': the first and last bin edges"),
    (["--mechanism", "magic"], _good(), r"^privsynth: error: mechanism: unknown mechanism 'magic'"),
    (["--ledger", PASSWORD_URL], _good(), r"^privsynth: error: ledger: .*the URL carries a password"),
    ([], _too_many_levels, r"^privsynth: error: column 'colour' has \d+ levels; the limit is 2000"),
], ids=["epsilon<0", "contradictory-schema", "unknown-mechanism", "password-in-ledger-url", "too-many-levels"])
def test_cli_refuses_bad_parameters_with_one_line_and_status_2(overrides, builder, pattern, tmp_path):
    _schema(tmp_path)
    values = _values(tmp_path, builder(tmp_path))
    done = _cli(_cli_args(values) + overrides, tmp_path)
    _assert_one_line_error(done, pattern)
    assert done.stderr.strip().count("\n") == 0  # refused before Prefect starts: nothing else is printed
    _no_secret(done.stdout + done.stderr, "the CLI output")
    assert not (tmp_path / "run").exists() and not (tmp_path / "ledger.sqlite").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES
                                  if c[0] in ("wrong delimiter", "out-of-domain category", "unexpected column",
                                                                "delta >= 1/n", "no budget and not unlimited",
                                                                "budget exceeded")],
                         ids=lambda c: c[0].replace(" ", "-"))
def test_cli_refuses_bad_data_with_one_line_and_no_traceback(case, harness, tmp_path):
    from prefect.settings import PREFECT_API_URL

    _, _, _, pattern, _ = case
    values = _build(case, tmp_path)
    done = _cli(_cli_args(values), tmp_path, api_url=PREFECT_API_URL.value())
    _assert_one_line_error(done, pattern.lstrip("^"))
    _no_secret(done.stdout + done.stderr, "the CLI output")
    _no_secret(_files_text(tmp_path / "run"), "the run folder")
    _assert_nothing_charged(values["ledger"])
    assert private_leftovers(tmp_path / "system-tmp") == []
