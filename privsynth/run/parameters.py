"""Run parameters: one pydantic model for the CLI, the Prefect flow (the UI's form) and deployments.

Everything here is checked before any data is read and before any budget is spent (the OpenDP
habit): the numbers are in range, the mechanism exists and accepts its options, the schema loads,
the input can be located, the output folder can be written.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from privsynth.errors import ParameterError  # noqa: F401  (re-exported: raised here)
from privsynth.io.credentials import check_no_literal_password
from privsynth.mechanisms import DEFAULT_MECHANISM, MECHANISM_MODULES
from privsynth.privacy.accounting import DEFAULT_DELTA
from privsynth.schema.limits import check_safe_path

# aim measured most accurate on Adult at epsilon 0.3, 1 and 3 (benchmarks/README.md, bench_peers.py): the default.


def bundled_example() -> tuple[str, str]:
    """Paths of the bundled Adult table (gzip CSV) and its schema."""
    data = resources.files("privsynth") / "data"
    return str(data / "adult.csv.gz"), str(data / "adult.yaml")


if TYPE_CHECKING:  # the registered names are known when the module runs: a type checker sees a str
    MechanismName: TypeAlias = str
else:  # a Literal of them for pydantic (the UI's drop-down, see ``mechanism`` below)
    MechanismName = Literal[tuple(sorted(MECHANISM_MODULES))]


class RunParameters(BaseModel):
    """Parameters of one synthesis run (the same names as the ``privsynth run`` options; the UI's form)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str | None = Field(None, description="CSV/Parquet path or URL, duckdb:PATH?table=NAME, or a SQLAlchemy URL "
                                                "with ?table=NAME (password as ${ENV_VAR}). Empty: the bundled Adult "
                                                "example.")
    schema_file: str | None = Field(None,
                                    description="YAML schema of the input (public metadata). Empty with an input: "
                                                      "the run discovers one under DP; empty without: the bundled "
                                                      "Adult example's.")
    # A Literal of the registered names: the UI's form shows a drop-down, not a free-text box.
    mechanism: MechanismName = Field(DEFAULT_MECHANISM,
                                     description="The private mechanism (see `privsynth mechanisms`).")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="Privacy budget epsilon for this release (> 0).")
    delta: float = Field(DEFAULT_DELTA, gt=0, lt=1, allow_inf_nan=False,
                         description="delta of the (epsilon, delta) statement; keep it well below 1/n. "
                                     "Checked against --public-rows when declared; n itself is private and never "
                                     "checked (privacy.json warns from the DP estimate of n).")
    rows: int | None = Field(None, ge=1, description="Synthetic rows to write. Empty: the release's DP estimate of n.")
    public_rows: int | None = Field(None, ge=1, description="The table's row count if it is PUBLIC knowledge (private "
                                                              "sampling's guarantee needs it); never read from the "
                                                              "data.")
    seed: int | None = Field(None, ge=0, description="TESTING ONLY: reproducible noise (numpy, not hardened against "
                                                       "floating-point attacks). Empty: OpenDP's secure samplers.")
    allow_seed_with_budget: bool = Field(False, description="Accept --seed on a dataset that has a privacy budget.")
    output: str | None = Field(None, description="Run folder: a path, or an fsspec URL (s3://, gs://, ...) for workers "
                                                 "without a shared disk. Empty: `runs/<run-id>` in the working folder.")
    sink: str | None = Field(None,
                             description="Also write the synthetic table here: duckdb:PATH?table=NAME, or a "
                                         ".parquet/.csv path.")
    dataset: str | None = Field(None, description="Dataset name in the budget ledger. Empty: the schema's name; "
                                                  "without a schema, the input's file or table name (people.csv: "
                                                  "people; the Python API's DataFrame: dataframe).")
    ledger: str | None = Field(None, description="Budget ledger SQLAlchemy URL. Empty: $PRIVSYNTH_LEDGER_URL or the "
                                                 "per-user ledger in $PRIVSYNTH_HOME.")
    unlimited: bool = Field(False, description="Spend without a budget limit on a dataset that has no budget (logged).")
    refuse_invalid_records: bool = Field(False, description="Refuse the run when a record fails the schema's "
                                         "expectations, instead of dropping it (the default, with or without a "
                                         "budget). The owner's explicit choice: such a run's outcome depends on an "
                                         "exact check of the records and is NOT covered by the DP guarantee (its "
                                         "privacy.json and console say so).")
    credentials_block: str | None = Field(None,
                                          description="Prefect runs only: the name of a Prefect Secret block that "
                                          "holds the database password. The worker reads it at run time into "
                                          "`PRIVSYNTH_DB_PASSWORD` and `PGPASSWORD` (write URLs as "
                                          "`user:${PRIVSYNTH_DB_PASSWORD}@host`); the password is never a parameter.",
                                          max_length=200)
    mechanism_options: dict[str, Any] = Field(default_factory=dict,
                                              description="Extra settings of the mechanism's config.")
    fine_decoding: float | None = Field(None, ge=0, lt=1, allow_inf_nan=False,
                                        description="Share of the budget for DP sub-bin counts of numeric and "
                                                    "temporal columns, so synthetic values follow the data inside a "
                                                    "bin (0: uniform inside the bin). Default: 0.05, or 0.2 where "
                                                    "discovery placed a decoded column's bins. The total charged is "
                                                    "unchanged.")
    public: list[str] = Field(default_factory=list, description="Without a schema: data contracts whose facts are "
                              "PUBLIC (a dbt schema.yml, a Great Expectations suite, a Frictionless table schema, or "
                              "db: for the source database's catalogue); used first, never charged.")
    public_model: str | None = Field(None, description="The dbt model to read when a schema.yml holds several.")
    trust_data_derived: bool = Field(False, description="Read as public the --public facts that may have been computed "
                                     "from the rows (a GX suite a profiler made, a catalogue's ENUM labels or CHECK "
                                     "values): the owner's word. Without it such a contract is refused; with it the "
                                     "schema marks them DATA-DERIVED and the DP guarantee does not cover them.")
    discovery_share: float | None = Field(None, gt=0, lt=0.9, allow_inf_nan=False,
                                          description="Without a schema: the share of the run's budget the discover "
                                                      "stage spends on the table's domain (empty: by need, 3% per "
                                                      "column it reads, at most 35%).")
    audit: bool = Field(False, description="Also write the INTERNAL (not DP) audit against the real data to "
                                           "internal-audit/ (never sent to Prefect).")
    audit_target: str | None = Field(None,
                                     description="Column for the audit's train-on-synthetic / test-on-real score.")
    audit_location: str | None = Field(None, description="A PRIVATE folder (path or fsspec URL) for the internal "
                                                         "audit instead of DIR/internal-audit/; required with a remote "
                                                         "run folder, where the audit is never uploaded beside the "
                                                         "public files.")
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

    # Where a run WRITES may not climb out with '..'; what it reads (input, schema_file) may, alike.
    @field_validator("output", "sink")
    @classmethod
    def _no_escape(cls, value: str | None, info) -> str | None:
        if value is not None:
            check_safe_path(value, info.field_name)
        return value

    def public_json(self) -> dict:
        """The parameters as the manifest records them (URLs carry no password: refused above)."""
        return self.model_dump(mode="json")


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
