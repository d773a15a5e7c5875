"""Run parameters: one pydantic model for the CLI, the Prefect flow (the UI's form) and deployments.

Everything here is checked before any data is read and before any budget is spent (the OpenDP
habit): the numbers are in range, the mechanism exists and accepts its options, the schema loads,
the input can be located, the output folder can be written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from privsynth.io import InputError, SourceSpec, check_writable_directory, parse_sink, parse_source
from privsynth.mechanisms import MECHANISM_MODULES, get_mechanism
from privsynth.schema import Schema, load_schema

# RAP measured ahead of reduced_space on Adult (benchmarks/README.md): the accurate default.
DEFAULT_MECHANISM = "rap"


def bundled_example() -> tuple[str, str]:
    """Paths of the bundled Adult table (gzip CSV) and its schema."""
    data = resources.files("privsynth") / "data"
    return str(data / "adult.csv.gz"), str(data / "adult.yaml")


class RunParameters(BaseModel):
    """Parameters of one synthesis run (the same names as the ``privsynth run`` options)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str | None = Field(None, description="CSV/Parquet path or URL, duckdb:PATH?table=NAME, or a SQLAlchemy URL "
                                                "with ?table=NAME. Empty: the bundled Adult example.")
    schema_file: str | None = Field(None, description="YAML schema of the input (public metadata). Empty: the bundled Adult schema.")
    mechanism: str = Field(DEFAULT_MECHANISM, description=f"One of {sorted(MECHANISM_MODULES)}.")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="Privacy budget epsilon for this release (> 0).")
    delta: float = Field(1e-9, gt=0, lt=1, allow_inf_nan=False, description="delta of the (epsilon, delta) report; must be < 1/n.")
    rows: int | None = Field(None, ge=1, description="Synthetic rows to write. Empty: as many as the input has (a public choice "
                                                      "only if n is public; set it explicitly otherwise).")
    seed: int | None = Field(None, ge=0, description="Seed for reproducible noise (not hardened against floating-point attacks). "
                                                       "Empty: OpenDP's secure samplers.")
    output: str | None = Field(None, description="Run folder. Empty: `runs/<run-id>/`.")
    sink: str | None = Field(None, description="Also write the synthetic table here: duckdb:PATH?table=NAME, or a .parquet/.csv path.")
    dataset: str | None = Field(None, description="Dataset name in the budget ledger. Empty: the schema's name.")
    ledger: str | None = Field(None, description="Budget ledger SQLAlchemy URL. Empty: $PRIVSYNTH_LEDGER_URL or runs/ledger.sqlite.")
    mechanism_options: dict[str, Any] = Field(default_factory=dict, description="Extra settings of the mechanism's config.")
    audit_target: str | None = Field(None, description="Column for the train-on-synthetic / test-on-real score (optional).")

    @field_validator("mechanism")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        if value not in MECHANISM_MODULES:
            raise ValueError(f"unknown mechanism {value!r}; expected one of {sorted(MECHANISM_MODULES)}")
        return value


class ParameterError(ValueError):
    """A run parameter is invalid; raised before any data is read."""


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "value"
        parts.append(f"{prefix}{field}: {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def parse_parameters(values: dict) -> RunParameters:
    try:
        return RunParameters(**values)
    except ValidationError as err:
        raise ParameterError(describe_validation_error(err)) from None


@dataclass(frozen=True)
class RunPlan:
    """A validated run: everything resolved before the data is touched."""

    parameters: RunParameters
    source: SourceSpec
    schema: Schema
    schema_path: str
    mechanism: ModuleType
    mechanism_config: Any
    output: Path | None
    dataset: str


def plan_run(parameters: RunParameters) -> RunPlan:
    """Resolve and check every parameter; raises ParameterError / InputError / SchemaError on the first problem."""
    from privsynth.pipeline import mechanism_config

    example_input, example_schema = bundled_example()
    input_spec = parameters.input or example_input
    schema_path = parameters.schema_file or (example_schema if parameters.input is None else None)
    if schema_path is None:
        raise ParameterError("--schema is required with --input: a schema is public metadata written from documentation")
    schema = load_schema(schema_path)
    source = parse_source(input_spec)
    if source.kind in ("csv", "parquet") and "://" not in source.location and not Path(source.location).is_file():
        raise InputError(f"input file {source.location!r} does not exist")
    mechanism = get_mechanism(parameters.mechanism)
    try:
        config = mechanism_config(mechanism, parameters.epsilon, parameters.delta, parameters.rows, parameters.mechanism_options)
    except ValidationError as err:
        raise ParameterError(describe_validation_error(err, prefix=f"mechanism {parameters.mechanism} option ")) from None
    except TypeError as err:
        raise ParameterError(f"mechanism {parameters.mechanism}: {err}") from None
    if parameters.ledger is not None:
        check_ledger_url(parameters.ledger)
    if parameters.rows is None and getattr(mechanism, "ROWS_OPTION", None) is None:
        releases_estimate = getattr(mechanism, "releases_n_estimate", None)
        if releases_estimate is None or not releases_estimate(config):
            raise ParameterError(f"--rows is required with mechanism {parameters.mechanism} and these options: its "
                                 "release carries no DP estimate of the row count")
    output = check_writable_directory(parameters.output) if parameters.output else None
    if parameters.sink:
        try:
            parse_sink(parameters.sink)  # the same parser write_sink uses, before any data is read
        except InputError as err:
            raise ParameterError(str(err).removeprefix("--")) from None
    if parameters.audit_target is not None and parameters.audit_target not in [c.name for c in schema.kept_columns]:
        raise ParameterError(f"audit_target {parameters.audit_target!r} is not a kept column of schema {schema.name!r}")
    return RunPlan(parameters=parameters, source=source, schema=schema, schema_path=str(schema_path), mechanism=mechanism,
                   mechanism_config=config, output=output, dataset=parameters.dataset or schema.name)


def check_ledger_url(url: str) -> None:
    """The ledger URL parses as a SQLAlchemy URL (the value is not echoed: it may hold a password)."""
    import sqlalchemy as sa

    try:
        sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        raise ParameterError("ledger: not a SQLAlchemy URL; expected e.g. sqlite:///runs/ledger.sqlite or "
                             "postgresql://user@host/db") from None


def check_delta_against_rows(delta: float, rows: int) -> None:
    """delta must be below 1/n: a larger delta allows releasing a whole record outright.

    The message does not state n (the row count is private under add/remove neighbours); a refusal
    only says that n >= 1/delta does not hold, and it is not a release.
    """
    if not math.isfinite(delta):
        raise ParameterError("delta must be finite")
    if not delta < 1.0 / rows:
        raise ParameterError(f"delta {delta:g} is not below 1/n for this input (n = its row count); "
                             "pick a --delta well below 1/n, e.g. 1e-9; nothing was charged")
