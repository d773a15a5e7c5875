"""The Python API: one function for notebooks, dbt Python models, Airflow or Dagster tasks.

``synthesize`` runs exactly what the CLI and the Prefect flow run (``privsynth.run.stages.execute``:
the same parameter checks, budget pre-check, ledger charge before noise, release store, DP report),
only without Prefect. ``Synthesizer`` is a smartnoise-style facade over it.

    import privsynth
    schema = privsynth.Schema.from_yaml("schemas/adult.yaml")
    release = privsynth.synthesize(data, schema, epsilon=1.0)
    release.to_pandas(); release.sample(10_000); release.privacy; release.report
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from privsynth.mechanisms.base import Release as MechanismRelease
from privsynth.privacy.accounting import DEFAULT_DELTA
from privsynth.run.context import direct
from privsynth.run.fine_decoding import decoding_counts
from privsynth.run.parameters import DEFAULT_MECHANISM, ParameterError, RunParameters, describe_validation_error
from privsynth.run.prepare import prepare_run
from privsynth.run.releases import read_release
from privsynth.run.stages import RunOutcome, execute, rounding_rng, synthesize_table
from privsynth.schema import Schema, load_schema
from privsynth.schema.encoding import arrow_schema
from privsynth.schema.stored import form_of


@dataclass(frozen=True)
class Release:
    """A DP synthetic release: the table, what it cost, and its DP report. Every method is free.

    ``table`` is the synthetic table in the schema's types; ``privacy`` what privacy.json holds
    (epsilon spent, rho, guarantee, noise source); ``report`` the DP report (fit to the mechanism's
    own noisy measurements); ``run_dir`` the run folder; ``audit`` the INTERNAL (not DP) audit when
    it was asked for, else None.
    """

    table: pa.Table
    privacy: dict
    report: dict
    run_dir: Path | str
    schema: Schema
    mechanism_release: MechanismRelease
    audit: dict | None = None
    seed: int | None = None

    def to_arrow(self) -> pa.Table:
        return self.table

    def to_pandas(self) -> pd.DataFrame:
        return self.table.to_pandas()

    def sample(self, rows: int, *, seed: int | None = None) -> pd.DataFrame:
        """``rows`` more records from the same release: post-processing, no privacy cost.

        Refused for an exact release (private sampling): its guarantee covers its records once each.
        """
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ParameterError(f"rows: expected a positive integer, got {rows!r}")
        if self.mechanism_release.exact:
            raise ParameterError(f"the {self.mechanism_release.mechanism} release is exact: its guarantee covers its "
                                 f"{self.table.num_rows} records once each, so more cannot be drawn from it")
        rng = rounding_rng(self.seed if seed is None else seed, draw=1 if seed is None else 2)
        own = arrow_schema(self.schema)
        forms = {f.name: form for f in self.table.schema if f.name in own.names and f.type != own.field(f.name).type
                 and (form := form_of(f.type)) is not None}  # the storage types the run wrote its table in
        return synthesize_table(self.mechanism_release, self.schema, rows, rng,
                                fine=decoding_counts(self.privacy), forms=forms).to_pandas()

    @property
    def epsilon(self) -> float | None:
        """The epsilon this run spent at its delta, all stages together (privacy.json's ``spent``: the figure the
        console, report.md and `privsynth budget show` state)."""
        from privsynth.run.results import PrivacyRecord

        return PrivacyRecord.of(self.privacy).epsilon()


def _schema_of(schema: Schema | str | Path | None) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    return load_schema(schema)


def _parameters(**values: Any) -> RunParameters:
    try:
        return RunParameters(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as err:
        raise ParameterError(describe_validation_error(err)) from None


def synthesize(data: Any = None, schema: Schema | str | Path | None = None, *, epsilon: float = 1.0,
               delta: float | None = None, mechanism: str | None = None, dataset: str | None = None,
               ledger: str | None = None, seed: int | None = None, options: dict | None = None,
               rows: int | None = None, public_rows: int | None = None, output: str | Path | None = None,
               sink: str | None = None, release_store: str | Path | None = None, unlimited: bool = False,
               refuse_invalid_records: bool = False, allow_seed_with_budget: bool = False, audit: bool = False,
               audit_target: str | None = None, audit_location: str | None = None,
               public: list[str] | None = None, public_model: str | None = None, trust_data_derived: bool = False,
               discovery_share: float | None = None, fine_decoding: float | None = None,
               progress: Callable[[str], None] | None = None) -> Release:
    """Release a DP synthetic table of ``data`` (the same run as ``privsynth run``, without Prefect).

    data: a source URL or path (every ``--input`` form), a pandas or polars DataFrame, a pyarrow
    Table or Dataset; None: the bundled Adult example. schema: a Schema, a YAML path, or None with
    the bundled example. Defaults as the CLI's: the default mechanism, delta 1e-9, the per-user
    ledger and release store. The dataset's budget is charged once, before any noise is drawn;
    a dataset without a budget is refused unless ``unlimited=True`` (explicit and logged). Records failing the
    schema's expectations are dropped before the mechanism, with or without a budget; ``refuse_invalid_records=True``
    refuses the run on one instead (the owner's choice: that outcome is not covered by the guarantee, and
    ``release.privacy["caveat"]`` says so).
    Without a schema the run discovers one under DP inside ``epsilon`` (``discovery_share`` of it, by need
    when None), after the public facts of the ``public`` data contracts; ``release.run_dir / "schema.yaml"``
    is reusable as the schema of later runs at no new cost. A contract that may be data-derived (a GX suite a
    profiler made, a catalogue's ENUM labels or CHECK values) is refused unless ``trust_data_derived=True``.
    ``fine_decoding``: the budget's share for DP sub-bin counts (``--fine-decoding``; None: 0.05, or 0.2 where
    discovery placed the bins).
    Raises the typed errors of ``privsynth.errors`` before anything is charged. ``progress``, if given,
    receives each progress line (stages, the mechanism's rounds: public facts only) as it happens.
    """
    schema_obj = _schema_of(schema)
    in_memory = data is not None and not isinstance(data, (str, Path))
    parameters = _parameters(
        input=None if in_memory or data is None else str(data),
        schema_file=str(schema) if isinstance(schema, (str, Path)) else None,
        mechanism=mechanism or DEFAULT_MECHANISM, epsilon=epsilon, delta=DEFAULT_DELTA if delta is None else delta,
        rows=rows, public_rows=public_rows, seed=seed, allow_seed_with_budget=allow_seed_with_budget,
        output=None if output is None else str(output), sink=sink, dataset=dataset, ledger=ledger, unlimited=unlimited,
        refuse_invalid_records=refuse_invalid_records,
        mechanism_options=dict(options or {}), audit=audit, audit_target=audit_target,
        audit_location=None if audit_location is None else str(audit_location), public=list(public or []),
        public_model=public_model, trust_data_derived=trust_data_derived, discovery_share=discovery_share,
        fine_decoding=fine_decoding)
    with forwarded_progress(progress):
        ctx = prepare_run(parameters, data=data if in_memory else None, schema=schema_obj, release_store=release_store,
                          progress=progress)
        outcome = execute(ctx, direct)
    try:
        return _release_of(outcome, outcome.schema, parameters.seed)
    finally:
        ctx.folder.release_local_copy()


def run(parameters: RunParameters, *, progress: Callable[[str], None] | None = None,
        release_store: str | Path | None = None) -> RunOutcome:
    """One run from its parameters (the ``privsynth run`` options), without Prefect: what the CLI runs when
    no Prefect API is configured. Returns the run's public outcome; raises the typed errors."""
    with forwarded_progress(progress):
        ctx = prepare_run(parameters, release_store=release_store, progress=progress)
        progress_line = progress or logging.getLogger("privsynth").info
        progress_line(f"run {ctx.run_id}: {parameters.mechanism} on {ctx.folder.manifest['input']['source']} at "
                      f"epsilon {parameters.epsilon:g} -> {ctx.folder.location}")
        outcome = execute(ctx, direct)
    ctx.folder.release_local_copy()
    return outcome


class _ProgressHandler(logging.Handler):
    def __init__(self, progress: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self.progress(record.getMessage())


@contextmanager
def attached_at_info(logger: logging.Logger, handler: logging.Handler) -> Iterator[None]:
    """While the block runs, ``handler`` hears ``logger``'s INFO records (the level is restored after)."""
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextmanager
def forwarded_progress(progress: Callable[[str], None] | None) -> Iterator[None]:
    """While the block runs, the library's own progress lines (``privsynth.*`` loggers below the run's
    stages: a mechanism's rounds) also go to ``progress``. They carry DP outputs and public facts only."""
    if progress is None:
        yield
        return
    with attached_at_info(logging.getLogger("privsynth.mechanisms"), _ProgressHandler(progress)):
        yield


def _release_of(outcome: RunOutcome, schema: Schema, seed: int | None) -> Release:
    local = Path(outcome.local_dir)
    mechanism_release = read_release(local / "release.parquet")
    run_dir = Path(outcome.run_dir) if "://" not in outcome.run_dir else outcome.run_dir
    return Release(table=pq.read_table(local / "synthetic.parquet"), privacy=outcome.privacy.to_json(),
                   report=outcome.report.to_json(), run_dir=run_dir, schema=schema,
                   mechanism_release=mechanism_release,
                   audit=None if outcome.audit is None else outcome.audit.to_json(), seed=seed)


class Synthesizer:
    """A smartnoise-synth style facade: ``Synthesizer.create("aim", epsilon=1.0).fit(df, schema=...)``.

    ``fit`` runs ``synthesize`` once (one charge); ``sample(n)`` draws from the fitted release for
    free, as often as wanted. Every keyword of ``synthesize`` is accepted by ``create``.
    """

    def __init__(self, mechanism: str, *, epsilon: float = 1.0, **settings: Any) -> None:
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.settings = settings
        self.release: Release | None = None

    @classmethod
    def create(cls, mechanism: str | None = None, *, epsilon: float = 1.0, **settings: Any) -> Synthesizer:
        return cls(mechanism or DEFAULT_MECHANISM, epsilon=epsilon, **settings)

    def fit(self, data: Any, *, schema: Schema | str | Path, **settings: Any) -> Synthesizer:
        self.release = synthesize(data, schema, epsilon=self.epsilon, mechanism=self.mechanism,
                                  **{**self.settings, **settings})
        return self

    def sample(self, rows: int, *, seed: int | None = None) -> pd.DataFrame:
        if self.release is None:
            raise ParameterError("sample() needs a fitted synthesizer: call fit(data, schema=...) first")
        return self.release.sample(rows, seed=seed)

    def fit_sample(self, data: Any, *, schema: Schema | str | Path, rows: int | None = None,
                   **settings: Any) -> pd.DataFrame:
        self.fit(data, schema=schema, **settings)
        return self.release.to_pandas() if rows is None else self.sample(rows)
