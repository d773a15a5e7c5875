"""The stages of a run as plain functions: artifact paths in, artifact paths (and public facts) out.

The Prefect tasks in ``tasks/`` are thin wrappers around these; tests and benchmarks call them
directly. Nothing here imports Prefect.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.encoding import (Domain, arrow_schema, decode_codes, domain_of, encode_codes, from_one_hot, one_hot,
                                one_hot_names)
from privsynth.io import (AtomicParquetWriter, InputError, SourceSpec, atomic_write_json, coerce_batch, iter_parquet,
                          iter_source, raw_arrow_schema)
from privsynth.mechanisms.base import Release
from privsynth.rounding import round_release
from privsynth.schema import Schema


class ValidationFailedError(ValueError):
    """The input failed schema validation; nothing was charged."""


# ---------------------------------------------------------------- test hook: simulated crashes

FAULT_ENV = "PRIVSYNTH_FAULT_INJECT"
FAULT_POINTS = ("after_charge", "after_release_stored", "during_rounding", "before_audit")


class InjectedFault(RuntimeError):
    """Raised by :func:`fault_point` in its in-process mode (tests only)."""


def fault_point(name: str) -> None:
    """TEST HOOK (no effect in normal runs): simulate a crash at the named point of a run.

    With ``PRIVSYNTH_FAULT_INJECT=<name>`` the process dies on the spot with ``os._exit(137)``, as a
    SIGKILL or an out-of-memory kill would: no ``finally`` block, no Prefect state change, no flush.
    With ``PRIVSYNTH_FAULT_INJECT=raise:<name>`` it raises :class:`InjectedFault` instead (for
    in-process tests). The points are listed in ``FAULT_POINTS``; tests/test_fault_injection.py
    proves a re-run of the same run is charged once and reads no half-written artifact.
    """
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted == name:
        os._exit(137)
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name!r}")


# ---------------------------------------------------------------- ingest

@dataclass(frozen=True)
class IngestResult:
    rows: int
    input_hash: str
    extra_columns: tuple[str, ...]


def ingest(spec: SourceSpec, schema: Schema, raw_path: Path, batch_rows: int = 65_536) -> IngestResult:
    """Copy the source into ``raw.parquet`` (typed by the schema) in one streaming pass.

    The input hash is the sha256 of the typed rows (Arrow IPC of each batch): the same rows give the
    same hash whatever the file's format or compression.
    """
    digest = hashlib.sha256()
    writer: AtomicParquetWriter | None = None
    extra: list[str] = []
    rows = 0
    origin = f"input {spec.describe()}"
    try:
        for frame in iter_source(spec, schema, batch_rows):
            if writer is None:
                columns = [str(c) for c in frame.columns]
                dupes = sorted({c for c in columns if columns.count(c) > 1})
                if dupes:
                    raise InputError(f"{origin}: duplicate column name(s) {dupes}")
                missing = [c for c in schema.column_names if c not in columns]
                if missing:
                    raise InputError(f"{origin}: missing column(s) {missing}; the schema {schema.name!r} expects "
                                     f"{list(schema.column_names)}")
                extra = [c for c in columns if c not in schema.column_names]
                target = raw_arrow_schema(schema, extra)
                writer = AtomicParquetWriter(raw_path, target)
            frame.columns = [str(c) for c in frame.columns]
            typed = coerce_batch(frame, schema, origin)[writer.schema.names]
            table = pa.Table.from_pandas(typed, schema=writer.schema, preserve_index=False)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as ipc:
                ipc.write_table(table)
            digest.update(sink.getvalue().to_pybytes())
            writer.write(table)
            rows += table.num_rows
        if writer is None or rows == 0:
            raise InputError(f"{origin} has a header but no data rows" if writer is not None else f"{origin} holds no table")
    except BaseException:
        if writer is not None:
            writer.__exit__(RuntimeError, None, None)  # discard the temporary file
        raise
    writer.__exit__(None, None, None)
    return IngestResult(rows=rows, input_hash=digest.hexdigest(), extra_columns=tuple(extra))


def iter_raw_frames(raw_path: Path, batch_rows: int = 65_536) -> Iterator[pd.DataFrame]:
    for batch in iter_parquet(raw_path, batch_rows):
        yield batch.to_pandas()


# ---------------------------------------------------------------- validate

def validate(raw_path: Path, schema: Schema, out_path: Path) -> dict:
    """Run the schema's Great Expectations suite over raw.parquet and write validation.json.

    validation.json holds pass/fail per expectation, never values or counts. The suite runs on the
    whole table in memory (GX's pandas engine); at tens of millions of rows this is the stage to move
    to GX's Spark or SQL engines.
    """
    from privsynth.validation import validate_frame

    report = validate_frame(pq.read_table(raw_path).to_pandas(), schema)
    atomic_write_json(out_path, report.public_json())
    # One line, "; "-separated: error messages and log lines are single lines (the CLI contract).
    message = "" if report.success else "; ".join(report.public_failure_message().splitlines())
    return {"success": report.success, "message": message}


# ---------------------------------------------------------------- binarise

def binarise(raw_path: Path, schema: Schema, bits_path: Path, encoding_path: Path) -> Domain:
    """raw.parquet -> bits.parquet (one-hot uint8, private) and encoding.json (public layout)."""
    domain = domain_of(schema)
    names = one_hot_names(schema)
    bits_schema = pa.schema([pa.field(n, pa.uint8()) for n in names])
    with AtomicParquetWriter(bits_path, bits_schema) as writer:
        for frame in iter_raw_frames(raw_path):
            codes = encode_codes(frame, schema)
            bits = one_hot(codes, domain)
            writer.write(pa.Table.from_arrays([pa.array(bits[:, j]) for j in range(bits.shape[1])], schema=bits_schema))
    atomic_write_json(encoding_path, {
        "encoding": "one-hot",
        "domain": domain.to_json(),
        "one_hot_columns": names,
        "columns": [{"name": c.name, "type": c.type, "levels": list(c.labels)} for c in schema.kept_columns],
        "numeric_decoding": "a value drawn uniformly inside its bin (integers: uniformly among the bin's integers)",
    })
    return domain


def iter_codes(bits_path: Path, domain: Domain, batch_rows: int = 65_536) -> Iterator[np.ndarray]:
    """Level-code batches from bits.parquet: the only way mechanisms see the data."""
    for batch in iter_parquet(bits_path, batch_rows):
        bits = np.column_stack([batch.column(j).to_numpy(zero_copy_only=False) for j in range(batch.num_columns)])
        yield from_one_hot(bits, domain)


# ---------------------------------------------------------------- mechanism

def mechanism_config(mechanism: ModuleType, epsilon: float, delta: float, rows: int | None, options: dict):
    """The mechanism's frozen config from run parameters; raises pydantic errors naming the field."""
    values = dict(options)
    values.setdefault("epsilon", epsilon)
    values.setdefault("delta", delta)
    # A mechanism whose guarantee caps the rows it releases (private sampling) names the config field
    # that takes --rows; for every other mechanism the row count is free post-processing.
    rows_option = getattr(mechanism, "ROWS_OPTION", None)
    if rows_option is not None and rows is not None:
        values.setdefault(rows_option, rows)
    return mechanism.Config(**values)


def run_mechanism(mechanism: ModuleType, config, bits_path: Path, domain: Domain, noise) -> Release:
    """One streaming statistics pass, then the mechanism on the statistics alone."""
    statistics = mechanism.collect_statistics(iter_codes(bits_path, domain), domain, config)
    release = mechanism.run(statistics, domain, config, noise)
    release.check_domain(domain)
    return release


# ---------------------------------------------------------------- rounding

def synthesize_table(release: Release, schema: Schema, rows: int | None, rng: np.random.Generator) -> tuple[pa.Table, np.ndarray]:
    """Records in the original schema from a release (post-processing)."""
    domain = domain_of(schema)
    codes = round_release(release, domain, rows, rng)
    frame = decode_codes(codes, schema, rng)
    table = pa.Table.from_pandas(frame, schema=arrow_schema(schema), preserve_index=False)
    return table, codes


def read_codes_of_table(path: Path, schema: Schema) -> np.ndarray:
    frame = pq.read_table(path).to_pandas()
    return encode_codes(frame, schema)


# ---------------------------------------------------------------- the mechanism stage, with its privacy rules

@dataclass(frozen=True)
class ReleaseOutcome:
    release: Release
    privacy: dict
    reused: bool


def release_stage(*, mechanism: ModuleType, config, bits_path: Path, domain: Domain, key: str, store, ledger,
                  dataset: str, delta: float, seed: int | None, column_names: list[str]) -> ReleaseOutcome:
    """Produce (or reuse) the DP release under DESIGN section 5's rules.

    1. A release already stored under ``key`` is reused: no noise is drawn and nothing is charged.
    2. Otherwise the ledger is charged *before* any noise is drawn (the noise source refuses to draw
       until it is authorized with the charge), and the charge is never refunded, even if a later
       step fails. The ledger's charge is idempotent per key, so a crash between the charge and the
       store does not charge the re-run again.
    3. The release is stored atomically under ``key`` before anyone reads it.
    """
    from privsynth.privacy.noise import make_noise_source

    found = store.get(key)
    if found is not None:
        release, privacy = found
        return ReleaseOutcome(release, privacy, reused=True)
    cost = mechanism.privacy_cost(config)
    receipt = ledger.charge(dataset, key, cost, f"{mechanism.NAME} release", require_budget=False)
    fault_point("after_charge")
    noise = make_noise_source(seed, key)
    noise.authorize(receipt.reference)
    release = run_mechanism(mechanism, config, bits_path, domain, noise)
    privacy = {
        "visibility": "public",
        "mechanism": mechanism.NAME,
        "config": config.model_dump(mode="json"),
        "cost": cost.report(delta),
        "noise": noise.describe(),
        "release_key": key,
        "ledger": {"dataset": dataset, "charged_now": not getattr(receipt, "reused", False)},
        "release_facts": release.public_facts,
        "exact_release": release.exact,
        "neighbouring_datasets": "add or remove one record",
    }
    if hasattr(mechanism, "check_feasible"):
        # Private sampling: what its guarantee allows for this p, d, n and epsilon (config-only facts).
        privacy["feasibility"] = mechanism.check_feasible(config).to_json()
    store.put(key, release, column_names, privacy)
    fault_point("after_release_stored")
    return ReleaseOutcome(release, privacy, reused=False)


def precheck_budget(ledger, dataset: str, cost) -> None:
    """Refuse a run the dataset's budget cannot cover, before any data is read.

    The binding check is the ledger's transactional charge in the mechanism stage; this early check
    only spares a doomed run its ingest and validation. A dataset with no budget runs ad hoc: its
    charges are recorded without a limit (and count against a budget set later).
    """
    from privsynth.privacy.ledger import BudgetExceededError, NonPrivateChargeError, UnknownDatasetError
    from privsynth.privacy.spending import fits_budget

    try:
        status = ledger.status(dataset)[0]
    except UnknownDatasetError:
        return
    if status.epsilon is None:
        return
    if not cost.is_dp:
        raise NonPrivateChargeError(f"dataset {dataset!r} has a privacy budget; a release with no DP guarantee "
                                    "cannot be charged to it")
    costs = [record.cost() for record in ledger.history(dataset)] + [cost]
    if not fits_budget(costs, status.epsilon, status.delta):
        raise BudgetExceededError(
            f"dataset {dataset!r}: this run needs {cost.epsilon_at(status.delta) if status.delta else cost.pure_epsilon:.4g} "
            f"epsilon but only {status.remaining_epsilon:.4g} of {status.epsilon:g} remains "
            f"(spent {status.spent_epsilon:.4g}); nothing was read or charged")
