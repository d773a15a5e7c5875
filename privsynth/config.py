"""Run parameters: one pydantic model for the CLI, the Prefect flow (the UI's form) and deployments.

Everything here is checked before any data is read and before any budget is spent (the OpenDP
habit): the numbers are in range, the mechanism exists and accepts its options, the schema loads,
the input can be located, the output folder can be written.
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from privsynth.io.credentials import check_no_literal_password
from privsynth.schema.encoding import domain_of
from privsynth.io import InputError, check_writable_directory, parse_sink
from privsynth.engine.sources import SourceSpec, parse_source
from privsynth.schema.limits import check_schema_limits, check_safe_path
from privsynth.mechanisms import MECHANISM_MODULES, get_mechanism
from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
from privsynth.schema import Schema, load_schema

# aim measured most accurate on Adult at epsilon 0.3, 1 and 3 (benchmarks/README.md, bench_peers.py): the default.
DEFAULT_MECHANISM = "aim"


def bundled_example() -> tuple[str, str]:
    """Paths of the bundled Adult table (gzip CSV) and its schema."""
    data = resources.files("privsynth") / "data"
    return str(data / "adult.csv.gz"), str(data / "adult.yaml")


MechanismName = Literal[tuple(sorted(MECHANISM_MODULES))]  # type: ignore[valid-type]


class RunParameters(BaseModel):
    """Parameters of one synthesis run (the same names as the ``privsynth run`` options; the UI's form)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str | None = Field(None, description="CSV/Parquet path or URL, duckdb:PATH?table=NAME, or a SQLAlchemy URL "
                                                "with ?table=NAME (password as ${ENV_VAR}). Empty: the bundled Adult example.")
    schema_file: str | None = Field(None, description="YAML schema of the input (public metadata). Empty: the bundled Adult schema.")
    # A Literal of the registered names: the UI's form shows a drop-down, not a free-text box.
    mechanism: MechanismName = Field(DEFAULT_MECHANISM, description="The private mechanism (see `privsynth mechanisms`).")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="Privacy budget epsilon for this release (> 0).")
    delta: float = Field(DEFAULT_DELTA, gt=0, lt=1, allow_inf_nan=False,
                         description="delta of the (epsilon, delta) statement; must be below 1/n.")
    rows: int | None = Field(None, ge=1, description="Synthetic rows to write. Empty: the release's DP estimate of n.")
    public_rows: int | None = Field(None, ge=1, description="The table's row count if it is PUBLIC knowledge (private "
                                                              "sampling's guarantee needs it); never read from the data.")
    seed: int | None = Field(None, ge=0, description="TESTING ONLY: reproducible noise (numpy, not hardened against "
                                                       "floating-point attacks). Empty: OpenDP's secure samplers.")
    allow_seed_with_budget: bool = Field(False, description="Accept --seed on a dataset that has a privacy budget.")
    output: str | None = Field(None, description="Run folder: a path, or an fsspec URL (s3://, gs://, ...) for workers "
                                                 "without a shared disk. Empty: `runs/<run-id>` in the working folder.")
    sink: str | None = Field(None, description="Also write the synthetic table here: duckdb:PATH?table=NAME, or a .parquet/.csv path.")
    dataset: str | None = Field(None, description="Dataset name in the budget ledger. Empty: the schema's name.")
    ledger: str | None = Field(None, description="Budget ledger SQLAlchemy URL. Empty: $PRIVSYNTH_LEDGER_URL or the "
                                                 "per-user ledger in $PRIVSYNTH_HOME.")
    unlimited: bool = Field(False, description="Spend without a budget limit on a dataset that has no budget (logged).")
    credentials_block: str | None = Field(None, description="Prefect runs only: the name of a Prefect Secret block that "
                                          "holds the database password. The worker reads it at run time into "
                                          "`PRIVSYNTH_DB_PASSWORD` and `PGPASSWORD` (write URLs as "
                                          "`user:${PRIVSYNTH_DB_PASSWORD}@host`); the password is never a parameter.",
                                          max_length=200)
    mechanism_options: dict[str, Any] = Field(default_factory=dict, description="Extra settings of the mechanism's config.")
    audit: bool = Field(False, description="Also write the INTERNAL (not DP) audit against the real data to "
                                           "internal-audit/ (never sent to Prefect).")
    audit_target: str | None = Field(None, description="Column for the audit's train-on-synthetic / test-on-real score.")
    keep_private: bool = Field(False, description="DEBUG: keep the private intermediates (typed rows, histogram).")

    @field_validator("mechanism", mode="before")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        if value not in MECHANISM_MODULES:
            raise ValueError(f"unknown mechanism {value!r}; expected one of {sorted(MECHANISM_MODULES)}")
        return value

    @field_validator("input", "ledger", "sink")
    @classmethod
    def _no_literal_password(cls, value: str | None, info) -> str | None:
        check_no_literal_password(value, info.field_name)
        return value

    @field_validator("output", "sink", "schema_file")
    @classmethod
    def _no_escape(cls, value: str | None, info) -> str | None:
        if value is not None:
            check_safe_path(value, info.field_name)
        return value

    def public_json(self) -> dict:
        """The parameters as the manifest records them (URLs carry no password: refused above)."""
        return self.model_dump(mode="json")


class ParameterError(ValueError):
    """A run parameter is invalid; raised before any data is read."""


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "value"
        message = e["msg"].removeprefix("Value error, ").removeprefix(f"{field}: ")
        parts.append(f"{prefix}{field}: {message}")
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
    source: SourceSpec | None
    schema: Schema
    schema_path: str
    mechanism: ModuleType
    mechanism_config: Any
    output: Path | None
    dataset: str
    cost: PrivacyCost
    bundled_example: bool = False

    @property
    def delta(self) -> float:
        return self.parameters.delta

    @property
    def unlimited(self) -> bool:
        """Spending without a budget is explicit: asked for, or the bundled (public) example."""
        return self.parameters.unlimited or self.bundled_example


def plan_run(parameters: RunParameters, *, schema: Schema | None = None, in_memory: bool = False) -> RunPlan:
    """Resolve and check every parameter; raises ParameterError / InputError / SchemaError on the first problem.

    Everything that needs only the parameters, the schema and the (public) domain is checked here,
    before any data is read and before any budget is charged: the mechanism's own ``check_config``,
    the resource limits of ``privsynth.schema.limits``, paths, URLs and credentials.
    """
    from privsynth.pipeline import mechanism_config

    example_input, example_schema = bundled_example()
    bundled = parameters.input is None and not in_memory
    if schema is None:
        schema_path = parameters.schema_file or (example_schema if bundled else None)
        if schema_path is None:
            raise ParameterError("--schema is required with --input: a schema is public metadata written from documentation")
        schema = load_schema(schema_path)
    else:
        schema_path = parameters.schema_file or f"<schema {schema.name}>"
    check_schema_limits(schema)
    source = None
    if not in_memory:
        source = parse_source(parameters.input or example_input)
        local = source.kind in ("csv", "parquet") and "://" not in source.location
        if local and any(ch in source.location for ch in "*?["):
            if not glob.glob(source.location):
                raise InputError(f"input {source.location!r} matches no file")
        elif local and not Path(source.location).is_file():
            raise InputError(f"input file {source.location!r} does not exist")
    mechanism = get_mechanism(parameters.mechanism)
    options = dict(parameters.mechanism_options)
    public_rows_option = getattr(mechanism, "PUBLIC_ROWS_OPTION", None)
    if public_rows_option is not None and parameters.public_rows is not None:
        options.setdefault(public_rows_option, parameters.public_rows)
    try:
        config = mechanism_config(mechanism, parameters.epsilon, parameters.delta, parameters.rows, options)
        domain = domain_of(schema)
        if hasattr(mechanism, "configure_for"):
            config = mechanism.configure_for(config, domain)
        if hasattr(mechanism, "check_config"):
            mechanism.check_config(config, domain)
        if hasattr(mechanism, "check_feasible"):
            mechanism.check_feasible(config)
    except ValidationError as err:
        raise ParameterError(describe_validation_error(err, prefix=f"mechanism {parameters.mechanism} option ")) from None
    except TypeError as err:
        raise ParameterError(f"mechanism {parameters.mechanism}: {err}") from None
    except ValueError as err:
        if type(err).__name__ == "InfeasibleRequestError":
            raise
        raise ParameterError(f"mechanism {parameters.mechanism}: {err}") from None
    if parameters.ledger is not None:
        check_ledger_url(parameters.ledger)
    if parameters.rows is None and getattr(mechanism, "ROWS_OPTION", None) is None:
        releases_estimate = getattr(mechanism, "releases_n_estimate", None)
        if releases_estimate is None or not releases_estimate(config):
            raise ParameterError(f"--rows is required with mechanism {parameters.mechanism} and these options: its "
                                 "release carries no DP estimate of the row count")
    from privsynth.io.storage import is_remote

    output = check_writable_directory(parameters.output) if parameters.output and not is_remote(parameters.output) else None
    if parameters.sink:
        try:
            parse_sink(parameters.sink)  # the same parser write_sink uses, before any data is read
        except InputError as err:
            raise ParameterError(str(err).removeprefix("--")) from None
    if parameters.audit_target is not None and parameters.audit_target not in [c.name for c in schema.kept_columns]:
        raise ParameterError(f"audit_target {parameters.audit_target!r} is not a kept column of schema {schema.name!r}")
    if parameters.audit_target is not None and not parameters.audit:
        raise ParameterError("audit_target needs audit=True (--audit): the train-on-synthetic score reads the real data")
    return RunPlan(parameters=parameters, source=source, schema=schema, schema_path=str(schema_path), mechanism=mechanism,
                   mechanism_config=config, output=output, dataset=parameters.dataset or schema.name,
                   cost=mechanism.privacy_cost(config), bundled_example=bundled)


def check_ledger_url(url: str) -> None:
    """The ledger URL parses as a SQLAlchemy URL (the value is not echoed: it may hold a password)."""
    import sqlalchemy as sa

    try:
        sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        raise ParameterError("ledger: not a SQLAlchemy URL; expected e.g. sqlite:////path/ledger.sqlite or "
                             "postgresql+psycopg://user@host/db") from None


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
