"""Hostile input: every bad file, schema or parameter is refused with a clear, value-free message.

For each case the suite checks that the error names what is wrong (file, column or parameter) and
what was expected, that no raw cell value (a distinctive secret planted in the bad cells) appears in
the message, the logs or any artifact, that nothing is charged in the budget ledger, that no release
is stored, that no private copy (raw.parquet, bits.parquet) of the failed run is left behind, and
that an existing output folder of another run is untouched.

The messages are checked fast at the library level (parse_parameters / plan_run / ingest /
validate, as the flow calls them); the flow-level guarantees run every case under
prefect_test_harness (the full parametrisation is marked slow, a representative subset runs by
default); a few CLI cases run in a subprocess to check exit status 2 and the one-line message.

A one-row table is a legitimate input: the DP guarantee is about neighbouring tables and holds for
any n, so it is released like any other (its synthetic rows carry essentially no signal); what
trips on tiny tables is delta >= 1/n, which is refused before validation with a count-free message.
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

from privsynth.config import ParameterError, check_delta_against_rows, parse_parameters, plan_run
from privsynth.io import InputError
from privsynth.pipeline import ValidationFailedError, ingest, validate
from privsynth.privacy.ledger import BudgetLedger, UnknownDatasetError
from privsynth.runfolder import RunFolderError
from privsynth.schema import SchemaError
from conftest import TOY_SCHEMA

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
    return {"delta": 0.05}  # 1/n = 0.025


def _unwritable_output(tmp):
    _csv(tmp, good_frame())
    (tmp / "a-file").write_text("not a folder")
    return {"output": str(tmp / "a-file" / "run")}


# (id, builder, error type, message pattern, stage that refuses it)
CASES = [
    ("empty file", _empty_file, InputError, r"input file '.*data\.csv' is empty \(0 bytes\); expected a header row", "ingest"),
    ("header only", _header_only, InputError, r"input csv:.*data\.csv has a header but no data rows", "ingest"),
    ("wrong delimiter", _wrong_delimiter, InputError, r"data\.csv': the header has one column but contains ';'; "
                                                      r"expected ','-delimited columns \['id', 'colour'", "ingest"),
    ("non-UTF-8 bytes", _non_utf8, InputError, r"data\.csv' is not UTF-8 text", "ingest"),
    ("missing column", _missing_column, InputError, r"data\.csv: missing column\(s\) \['weight'\]; the schema 'toy' expects", "ingest"),
    ("unexpected column", _unexpected_column, ValidationFailedError, r"unexpected column\(s\) \['ssn'\]; expected exactly "
                                                                     r"the schema's 5 columns", "validate"),
    ("wrong type", _wrong_type, InputError, r"column 'size' has value\(s\) that are not numbers \(the schema says integer\)", "ingest"),
    ("out-of-domain category", _out_of_domain_category, ValidationFailedError,
     r"column 'colour': some value\(s\) not among the schema's 3 categories", "validate"),
    ("out-of-domain number", _out_of_domain_number, ValidationFailedError, r"column 'weight': some value\(s\) outside \[0, 1\]", "validate"),
    ("all-null column", _all_null_column, ValidationFailedError, r"column 'colour': every value is missing", "validate"),
    ("NaN in numeric column", _nan_in_numeric, ValidationFailedError,
     r"column 'weight': some missing value\(s\) \(null/NaN\) but the column is not nullable", "validate"),
    ("inf in numeric column", _inf_in_numeric, ValidationFailedError,
     r"column 'weight': some value\(s\) are \+inf or -inf; numeric values must be finite", "validate"),
    ("duplicate column names", _duplicate_columns, InputError, r"data\.csv': duplicate column name\(s\) \['weight'\]", "ingest"),
    ("duplicate column names (Parquet)", _duplicate_columns_parquet, InputError,
     r"data\.parquet': duplicate column name\(s\) \['size'\]", "ingest"),
    ("no header row", _no_header_row, InputError, r"data\.csv': duplicate column name\(s\) 1 \(names withheld: "
                                                  r"not schema columns\); expected each of \['id', 'colour'", "ingest"),
    ("truncated Parquet", _truncated_parquet, InputError, r"data\.parquet' is not a readable Parquet file", "ingest"),
    ("self-contradicting schema", _contradictory_schema, SchemaError,
     r"schema\.yaml: column 'weight': the first and last bin edges must equal the bounds \[0\.0, 1\.0\]", "plan"),
    ("epsilon = 0", _good(epsilon=0), ParameterError, r"^epsilon: Input should be greater than 0$", "plan"),
    ("epsilon < 0", _good(epsilon=-1.0), ParameterError, r"^epsilon: Input should be greater than 0$", "plan"),
    ("epsilon not a number", _good(epsilon="abc"), ParameterError, r"^epsilon: Input should be a valid number", "plan"),
    ("epsilon NaN", _good(epsilon=float("nan")), ParameterError, r"^epsilon: Input should be a finite number$", "plan"),
    ("delta >= 1", _good(delta=1.0), ParameterError, r"^delta: Input should be less than 1$", "plan"),
    ("delta >= 1/n", _delta_too_large, ParameterError, r"^delta 0\.05 is not below 1/n for this input \(n = its row count\)", "ingest"),
    ("rows = 0", _good(rows=0), ParameterError, r"^rows: Input should be greater than or equal to 1$", "plan"),
    ("rows < 0", _good(rows=-5), ParameterError, r"^rows: Input should be greater than or equal to 1$", "plan"),
    ("unknown mechanism", _good(mechanism="magic"), ParameterError,
     r"^mechanism: unknown mechanism 'magic'; expected one of \['aim', 'microaggregation', 'private_sampling', 'rap', 'reduced_space'\]$", "plan"),
    ("unknown mechanism option", _good(mechanism_options={"bogus": 1}), ParameterError,
     r"^mechanism reduced_space option bogus: Extra inputs are not permitted$", "plan"),
    ("output folder cannot be written", _unwritable_output, InputError,
     r"^output folder '.*a-file/run' cannot be written \(Not a directory\)$", "plan"),
]
CASE_IDS = [c[0].replace(" ", "-") for c in CASES]
# One case per refusing stage (and per kind of guarantee) for the default flow-level run.
FAST_FLOW_CASES = ("wrong delimiter", "unexpected column", "out-of-domain category", "delta >= 1/n", "epsilon < 0")


def _values(tmp: Path, overrides: dict) -> dict:
    values = {"input": str(tmp / "data.csv"), "schema_file": str(tmp / "schema.yaml"), "mechanism": "reduced_space",
              "epsilon": 1.0, "rows": 20, "seed": 5, "output": str(tmp / "run"), "ledger": f"sqlite:///{tmp / 'ledger.sqlite'}",
              "mechanism_options": {"points_per_statistic": 1.0}}
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


def _front_half(values: dict, work: Path) -> None:
    """What the flow does before any budget is touched, as library calls."""
    parameters = parse_parameters(values)
    plan = plan_run(parameters)
    raw = work / "raw.parquet"
    result = ingest(plan.source, plan.schema, raw)
    check_delta_against_rows(parameters.delta, result.rows)
    outcome = validate(raw, plan.schema, work / "validation.json")
    if not outcome["success"]:
        raise ValidationFailedError(outcome["message"])


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into {where}"


# ---------------------------------------------------------------- library level (fast)

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_case_is_refused_with_a_clear_value_free_message(case, tmp_path):
    name, _, error, pattern, stage = case
    work = tmp_path / "work"
    work.mkdir()
    values = _build(case, tmp_path)
    with pytest.raises(error) as info:
        _front_half(values, work)
    message = str(info.value)
    assert "\n" not in message.strip()
    assert re.search(pattern, message), f"{name}: {message!r} does not match {pattern!r}"
    _no_secret(message, f"the error of {name!r}")
    if stage in ("plan",):
        assert not (tmp_path / "run").exists()  # refused before any folder is made
    if stage == "ingest" and error is InputError:
        assert not (work / "raw.parquet").exists()  # the temporary copy was discarded
    assert not list(work.glob(".*.tmp"))
    if (work / "validation.json").exists():
        _no_secret((work / "validation.json").read_text(), "validation.json")


def test_delta_message_does_not_state_the_row_count():
    with pytest.raises(ParameterError) as info:
        check_delta_against_rows(0.05, 37)
    assert "37" not in str(info.value) and "0.027" not in str(info.value)
    check_delta_against_rows(0.01, 99)  # 0.01 < 1/99: accepted
    with pytest.raises(ParameterError):
        check_delta_against_rows(0.01, 100)  # delta = 1/n exactly is refused


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
    """An output folder holding another, finished run."""
    folder = tmp / "other-run"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"run_id": "other", "run_key": {"input": "elsewhere.csv"},
                                                      "stages": {}, "artifacts": {}}))
    pq.write_table(pa.table({"colour": ["red", "blue"]}), folder / "synthetic.parquet")
    (folder / "audit.json").write_text("{}")
    return folder


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


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
def test_flow_refuses_case_without_charge_release_or_private_leftovers(case, harness, prefect_logs, tmp_path):
    from flows.synthesize import synthesize

    name, _, error, pattern, stage = case
    values = _build(case, tmp_path)
    other = _other_run(tmp_path)
    before = _snapshot(other)
    store = tmp_path / "releases"
    with pytest.raises(error) as info:
        synthesize(parse_parameters(values), release_store=str(store))
    message = str(info.value)
    assert re.search(pattern, message), f"{name}: {message!r}"
    assert "\n" not in message

    _assert_nothing_charged(values["ledger"])
    assert not store.exists() or not any(store.iterdir())
    run = tmp_path / "run"
    for private in ("raw.parquet", "bits.parquet"):
        assert not (run / private).exists(), f"{name}: {private} left behind"
    assert not list(run.glob(".*.tmp")) if run.exists() else True
    if stage == "validate":
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["stages"]["validate"]["success"] is False
        assert "raw.parquet" in manifest["discarded"] and "raw.parquet" not in manifest["artifacts"]
        assert json.loads((run / "validation.json").read_text())["success"] is False
    if stage == "plan":
        assert not run.exists()  # refused before the run folder was made
    assert _snapshot(other) == before

    _no_secret(message, "the error")
    if stage in ("ingest", "validate"):
        assert any("Traceback" in line or "failed" in line.lower() for line in prefect_logs)  # the logs were captured
    _no_secret("\n".join(prefect_logs), "the logs")
    _no_secret(_files_text(run), "the run folder")
    assert not any("Retry" in line for line in prefect_logs), "a bad input is not retried"


def test_only_transient_failures_are_retried():
    from types import SimpleNamespace

    from tasks.common import retry_transient_only

    def retried(error: BaseException) -> bool:
        return retry_transient_only(None, None, SimpleNamespace(data=error))

    assert retried(OSError("network file system hiccup")) and retried(TimeoutError())
    for error in (InputError("x"), ParameterError("x"), SchemaError("x"), ValidationFailedError("x"), RunFolderError("x")):
        assert not retried(error), type(error).__name__


def test_an_existing_run_folder_of_another_run_is_refused_and_untouched(harness, tmp_path):
    from flows.synthesize import synthesize

    values = _build(CASES[0], tmp_path) | {"input": str(_csv(tmp_path, good_frame()))}
    other = _other_run(tmp_path)
    before = _snapshot(other)
    with pytest.raises(RunFolderError, match=r"output folder '.*other-run' holds a different run \(other\)"):
        synthesize(parse_parameters(values | {"output": str(other)}), release_store=str(tmp_path / "releases"))
    assert _snapshot(other) == before

    stranger = tmp_path / "photos"
    stranger.mkdir()
    (stranger / "holiday.jpg").write_bytes(b"\xff\xd8 not really")
    with pytest.raises(RunFolderError, match="is not empty and holds no privsynth run"):
        synthesize(parse_parameters(values | {"output": str(stranger)}), release_store=str(tmp_path / "releases"))
    assert [p.name for p in stranger.iterdir()] == ["holiday.jpg"]
    _assert_nothing_charged(values["ledger"])


def test_a_one_row_table_is_released_like_any_other(harness, tmp_path):
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
    # delta < 1/n = 1 always holds for n = 1; on a two-row table delta = 0.5 = 1/n trips, count-free.
    _csv(tmp_path, good_frame(2))
    with pytest.raises(ParameterError, match=r"^delta 0\.5 is not below 1/n") as info:
        synthesize(parse_parameters(values | {"delta": 0.5, "output": str(tmp_path / "run2")}),
                   release_store=str(tmp_path / "releases"))
    assert "2" not in str(info.value).replace("0.5", "")
    assert not (tmp_path / "run2" / "raw.parquet").exists()
    assert len(BudgetLedger(values["ledger"]).history("toy")) == 1


# ---------------------------------------------------------------- the command line

def _cli(args: list[str], tmp: Path, api_url: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PREFECT_HOME=str(tmp / "prefect-home"), PRIVSYNTH_RELEASE_STORE=str(tmp / "releases"),
               GX_ANALYTICS_ENABLED="false", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return subprocess.run([str(CLI), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def _cli_args(values: dict) -> list[str]:
    args = ["run", "--input", values["input"], "--schema", values["schema_file"], "--mechanism", values["mechanism"],
            "--epsilon", str(values["epsilon"]),
            "--rows", str(values["rows"]), "--seed", str(values["seed"]), "--output", values["output"],
            "--ledger", values["ledger"], "--option", "points_per_statistic=1"]
    if "delta" in values:
        args += ["--delta", str(values["delta"])]
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
], ids=["epsilon<0", "contradictory-schema", "unknown-mechanism"])
def test_cli_refuses_bad_parameters_with_one_line_and_status_2(overrides, builder, pattern, tmp_path):
    _schema(tmp_path)
    values = _values(tmp_path, builder(tmp_path))
    done = _cli(_cli_args(values) + overrides, tmp_path)
    _assert_one_line_error(done, pattern)
    assert done.stderr.strip().count("\n") == 0  # refused before Prefect starts: nothing else is printed
    assert not (tmp_path / "run").exists() and not (tmp_path / "ledger.sqlite").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("wrong delimiter", "out-of-domain category", "unexpected column",
                                                                "delta >= 1/n")],
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
    assert not (tmp_path / "run" / "raw.parquet").exists()
