"""The stages of a run as plain functions, and the one orchestration every caller uses.

``execute(context, runner)`` runs validate -> binarise -> mechanism -> rounding -> report (-> the
opt-in internal audit). ``privsynth.synthesize`` calls it with ``direct`` (each stage a plain call);
the Prefect flow calls it with a runner that submits each stage as its task from ``tasks/``; the
CLI calls the flow. So the privacy rules below are written once:

* every parameter is checked (``privsynth.run.plan.plan_run``) and the budget pre-checked before the
  data is opened;
* the ledger is charged before any noise is drawn, and records the draw (``claim_noise``), so no
  release key is ever drawn twice for one charge; a stored release is reused, never re-drawn;
* private intermediates (the typed rows, the histogram) live in an owner-only temporary folder
  deleted when the run ends (kept only with ``keep_private=True``, for debugging); the run folder
  holds public artifacts only, and the internal audit goes to ``internal-audit/`` when asked for.

Nothing here imports Prefect.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.engine.datasource import ValidationFailedError
from privsynth.errors import PrivsynthError, RefusalError
from privsynth.io import atomic_write_bytes, atomic_write_json, atomic_write_table
from privsynth.io.storage import RemoteFolder, is_remote
from privsynth.mechanisms.base import Measurement, Release
from privsynth.mechanisms.progress import reporting_progress
from privsynth.run import phase
from privsynth.run.charge import ReleaseRequest, epsilon_statement, release_stage
from privsynth.run.context import RunContext, Runner, direct
from privsynth.run.discover import DiscoveryOutcome, stage_discover
from privsynth.run.earlier_counts import earlier_counts, keyed_config
from privsynth.run.faults import fault_point
from privsynth.run.records import release_codes
from privsynth.run.releases import measurements_from_table, read_release, write_release
from privsynth.run.results import (
    AuditResult,
    BinarisedStatistics,
    PrivacyRecord,
    ReportResult,
    RoundingFacts,
    ValidationResult,
    thawed_json,
)
from privsynth.run.spent import truthful_refusal, with_run_spend
from privsynth.run.storage import declared_forms, run_storage_forms
from privsynth.run.validate import stage_validate
from privsynth.schema import Schema
from privsynth.schema.determined import structural_zeros
from privsynth.schema.encoding import (
    Domain,
    arrow_schema,
    decode_codes,
    domain_of,
    encode_codes,
    one_hot_names,
    structural_levels,
)
from privsynth.schema.stored import from_stored, to_stored
from privsynth.schema.workload import Histogram

logger = logging.getLogger("privsynth.run")

__all__ = ["ValidationFailedError", "RunContext", "execute", "direct", "STAGES"]


def stage_binarise(ctx: RunContext, validation: ValidationResult) -> BinarisedStatistics:
    """encoding.json (public layout) and the histogram of level codes (private, in the private folder)."""
    if not isinstance(validation, ValidationResult):
        raise ValidationFailedError("binarise needs a validated input")
    domain = ctx.domain
    atomic_write_json(ctx.folder.file("encoding.json"), {
        "encoding": "one-hot",
        "domain": domain.to_json(),
        "one_hot_columns": one_hot_names(ctx.schema),
        "columns": [{"name": c.name, "type": c.type, "levels": list(c.labels)} for c in ctx.schema.kept_columns],
        "numeric_decoding": ("a sub-bin drawn in proportion to DP sub-bin counts (privacy.json fine_decoding), then a "
                             "value uniformly inside it" if ctx.plan.fine_decoding is not None else
                             "a value drawn uniformly inside its bin (integers: uniformly among the bin's integers)"),
    })
    ctx.folder.record("binarise", ["encoding.json"])
    histogram = ctx.handle(validation.drop_faulty_records).histogram()
    path = ctx.private_dir / "histogram.parquet"
    write_histogram(path, histogram, domain)
    ctx.progress(f"binarise: {domain.n_attributes} attributes, {domain.width} one-hot levels")
    return BinarisedStatistics(path, validation.drop_faulty_records)


def write_histogram(path: Path, histogram: Histogram, domain: Domain) -> None:
    columns = {name: pa.array(histogram.codes[:, j].astype(np.int32)) for j, name in enumerate(domain.names)}
    columns["__count__"] = pa.array(histogram.counts.astype(np.int64))
    atomic_write_table(path, pa.table(columns), private=True)  # private: exact counts


def read_histogram(path: Path, domain: Domain) -> Histogram:
    table = pq.read_table(path)
    codes = np.column_stack([table.column(n).to_numpy() for n in domain.names]) if table.num_rows else \
        np.zeros((0, domain.n_attributes), dtype=np.int32)
    return Histogram(codes.astype(np.int64), table.column("__count__").to_numpy().astype(np.int64))


def stage_mechanism(ctx: RunContext, statistics: BinarisedStatistics) -> PrivacyRecord:
    """Charge, draw (or reuse) and persist the release; release.parquet, measurements, privacy.json."""
    from privsynth.privacy.keys import data_fingerprint, release_key

    plan = ctx.plan
    domain = ctx.domain
    histogram = read_histogram(statistics.path, domain)
    secret = ctx.ledger.release_secret()
    earlier = earlier_counts(ctx.schema, ctx.discovery.counts_by_column()) \
        if ctx.discovery is not None and plan.mechanism.takes_earlier_counts else ()
    key = release_key(secret, data_fingerprint(secret, histogram), ctx.schema.content_hash(), plan.mechanism.NAME,
                      keyed_config(plan.mechanism_config.model_dump(mode="json"), earlier), plan.parameters.seed,
                      None if plan.parameters.seed is not None else ctx.run_id)
    ctx.folder.note(release_key=key)  # an HMAC under the ledger's secret: no test of guesses without it
    names = one_hot_names(ctx.schema)
    if ctx.discovery is None:
        ctx.progress(f"mechanism: {plan.mechanism.NAME} at {epsilon_statement(plan.cost, plan.delta)}")
    else:  # one figure: the run's epsilon; the mechanism's part is a share of its rho, never a second epsilon
        ctx.progress(f"mechanism: {plan.mechanism.NAME}, rho {plan.cost.rho:.4g} of the run's epsilon "
                     f"{plan.parameters.epsilon:g} at delta {plan.delta:g} (the discover stage spent rho "
                     f"{ctx.discovery.rho:.4g} of it)")
    fine_counts = None
    if plan.fine_decoding is not None and ctx.store.get(key) is None:
        from privsynth.run.fine_decoding import sub_bin_counts

        fine_counts = sub_bin_counts(ctx.data, ctx.schema,  # private: only its noisy release leaves
                                     drop_faulty_records=statistics.drop_faulty_records)
    # The mechanism's rounds (aim: the marginal measured, rho spent, time left; public facts only) reach the
    # run's progress lines: the console, the Python API's callback, the Prefect run logs.
    with reporting_progress(lambda progress: ctx.progress(progress.describe())):
        request = ReleaseRequest(mechanism=plan.mechanism, config=plan.mechanism_config, statistics=histogram,
                                 domain=domain, key=key, dataset=plan.dataset, delta=plan.delta,
                                 seed=plan.parameters.seed, column_names=tuple(names),
                                 require_budget=not plan.unlimited, fine=plan.fine_decoding, schema=ctx.schema,
                                 fine_counts=fine_counts, run_id=ctx.run_id, earlier=earlier)
        outcome = release_stage(request, store=ctx.store, ledger=ctx.ledger, say=ctx.progress)
    write_release(ctx.folder.file("release.parquet"), outcome.release, names)
    artifacts = ["release.parquet", "privacy.json"]
    if outcome.release.measurements:
        from privsynth.run.releases import measurements_table

        atomic_write_table(ctx.folder.file("measurements.parquet"), measurements_table(outcome.release.measurements))
        artifacts.append("measurements.parquet")
    document = with_run_spend(ctx, dict(outcome.privacy, reused_stored_release=outcome.reused))
    atomic_write_json(ctx.folder.file("privacy.json"), document)
    ctx.folder.record("mechanism", artifacts, privacy_spent=document["cost"], reused_stored_release=outcome.reused,
                      replayed_draws=outcome.replayed)
    ctx.progress("mechanism: reused the stored release of this run; nothing charged" if outcome.reused else
                 f"mechanism: release charged to dataset {plan.dataset!r} and stored")
    return PrivacyRecord.of(document)


def output_rows(rows: int | None, privacy: PrivacyRecord) -> int | None:
    """Rows to write: the requested count, else the release's own DP estimate of n (never the private n).

    An exact release (private sampling) is published as it is: None.
    """
    if privacy.exact_release:
        return None
    if rows is not None:
        return rows
    estimate = privacy.n_estimate
    if estimate is None:
        raise ValueError(f"mechanism {privacy.mechanism} gives no DP estimate of n; pass rows")
    return max(1, int(round(estimate)))


def synthesize_table(release: Release, schema: Schema, rows: int | None, rng: np.random.Generator,
                     fine: dict | None = None, measurements: tuple[Measurement, ...] = (),
                     forms: dict[str, str] | None = None) -> pa.Table:
    """Records in the original schema from a release (post-processing, free); ``fine``: the run's DP
    sub-bin counts (``privacy.json`` fine_decoding), else values uniform inside their bins;
    ``measurements``: the release's noisy measurements, whose counts decide which ``<missing>`` and
    ``<out-of-domain>`` levels the synthetic table may hold (``evidence.unsupported_levels``); ``forms``: each
    column's storage type (``run.storage``), else the schema's ``stored_as``."""
    domain = domain_of(schema)
    codes = release_codes(release, domain, rows, rng, structural_levels(schema), structural_zeros(schema),
                          measurements)
    frame = decode_codes(codes, schema, rng, fine)
    if forms is None:
        forms = declared_forms(schema, {})
    return to_stored(pa.Table.from_pandas(frame, schema=arrow_schema(schema), preserve_index=False), forms)


def synthetic_frame(table: pa.Table, schema: Schema) -> pd.DataFrame:
    """The synthetic table in the pipeline's own types (decimals as doubles, aware moments as UTC wall time), as
    the encoder and the schema's suite read it."""
    return from_stored(table, arrow_schema(schema)).to_pandas()


def rounding_rng(seed: int | None, draw: int = 0) -> np.random.Generator:
    """Post-processing randomness: needs no secrecy, only reproducibility when seeded."""
    return np.random.default_rng(None if seed is None else [seed, 1, draw])


def stored_measurements(ctx: RunContext) -> tuple[Measurement, ...]:
    """The release's noisy measurements from the run folder (public, DP); none when it stored none."""
    if not ctx.folder.trusted("measurements.parquet"):
        return ()
    return measurements_from_table(pq.read_table(ctx.folder.file("measurements.parquet")))


def stage_rounding(ctx: RunContext, privacy: PrivacyRecord) -> RoundingFacts:
    """synthetic.parquet in the schema's types (and the optional sink): post-processing of the release."""
    from privsynth.io import write_sink

    release = read_release(ctx.folder.require("release.parquet"))
    from privsynth.run.fine_decoding import decoding_counts

    measurements = stored_measurements(ctx)
    table = synthesize_table(release, ctx.schema, output_rows(ctx.plan.parameters.rows, privacy),
                             rounding_rng(ctx.plan.parameters.seed), decoding_counts(privacy.document),
                             measurements, run_storage_forms(ctx))
    atomic_write_table(ctx.folder.file("synthetic.parquet"), table)
    valid = validate_synthetic(ctx, table)
    sink = write_sink(table, ctx.plan.parameters.sink) if ctx.plan.parameters.sink else None
    facts = RoundingFacts(rows=table.num_rows, synthetic_valid=valid, sink=sink)
    fault_point("during_rounding")
    ctx.folder.record("rounding", ["synthetic.parquet", "synthetic-validation.json"], **facts.to_json())
    ctx.progress(f"rounding: wrote {table.num_rows} synthetic rows" + (f" and {sink}" if sink is not None else ""))
    return facts


def validate_synthetic(ctx: RunContext, table: pa.Table) -> bool:
    """The synthetic table validated by Great Expectations against the schema's own suite
    (``engine.expectations.gx_suite``): synthetic-validation.json, public (it is about synthetic rows).

    A failure is a bug of the pipeline, not of the input: logged as a WARNING and recorded; the run
    goes on (the release is charged and stored already). Returns whether the table passed.
    """
    from privsynth.engine.gx_run import engine_only, gx_validate

    try:
        report = gx_validate(synthetic_frame(table, ctx.schema), ctx.schema, synthetic=True)
        doc = {"validated_with": "great_expectations", "suite": f"privsynth-{ctx.schema.name}-synthetic",
               **report.to_json(), "not_run_by_gx": engine_only(ctx.schema)}
        problem = "; ".join(report.failure_message().splitlines())
    except RuntimeError as err:  # GX itself failed: its message names no value (gx_run)
        doc = {"validated_with": "great_expectations", "success": False, "error": str(err)}
        problem = str(err)
    atomic_write_json(ctx.folder.file("synthetic-validation.json"), doc)
    if not doc["success"]:
        logger.warning("BUG: the synthetic table fails its own schema: %s (details: %s)", problem,
                       ctx.folder.file("synthetic-validation.json"))
    return bool(doc["success"])


def stage_report(ctx: RunContext, privacy: PrivacyRecord, rounding: RoundingFacts) -> ReportResult:
    """report.json / report.md / report.html and figures/: the synthetic table against the release's own
    noisy measurements, with a 95% bound per column and pair (DP, free: built from the release only)."""
    from privsynth.report.dp_report import dp_report, render_report
    from privsynth.report.figures import write_public_figures
    from privsynth.report.html import render_html

    fault_point("before_report")
    release = read_release(ctx.folder.require("release.parquet"))
    measurements = stored_measurements(ctx)
    synthetic = encode_codes(synthetic_frame(pq.read_table(ctx.folder.require("synthetic.parquet")), ctx.schema),
                             ctx.schema)
    report = dp_report(release, measurements, synthetic, ctx.schema, privacy.to_json())
    root = ctx.folder.file("report.json").parent
    figures = write_public_figures(report, root / "figures")
    report["figures"] = figures
    atomic_write_json(ctx.folder.file("report.json"), report)
    atomic_write_bytes(ctx.folder.file("report.md"), render_report(report, figures).encode())
    atomic_write_bytes(ctx.folder.file("report.html"), render_html(report, figures, root).encode())
    images = [figures["pairs"], figures["budget"], *figures["columns"]]
    ctx.folder.record("report", ["report.json", "report.md", "report.html", *images])
    return ReportResult.of(report)


def stage_audit(ctx: RunContext, statistics: BinarisedStatistics, rounding: RoundingFacts) -> AuditResult:
    """INTERNAL (not DP), opt-in: the synthetic table against the real one, in ``internal-audit/``."""
    from privsynth.report.audit_quality import write_quality
    from privsynth.report.internal_audit import build_audit, render_markdown

    location = ctx.plan.parameters.audit_location
    target = audit_folder(ctx, location)
    histogram = read_histogram(statistics.path, ctx.domain)
    real = np.concatenate(list(histogram.iter_codes())) if histogram.codes.shape[0] else \
        np.zeros((0, ctx.domain.n_attributes), dtype=np.int64)
    synthetic = encode_codes(synthetic_frame(pq.read_table(ctx.folder.require("synthetic.parquet")), ctx.schema),
                             ctx.schema)
    audit = build_audit(real, synthetic, ctx.schema, ctx.domain, target, target_column=ctx.plan.parameters.audit_target)
    # The public report's bounds, checked against the real marginals (coverage), and the quality pictures.
    report = json.loads(ctx.folder.require("report.json").read_text()) if ctx.folder.trusted("report.json") else None
    audit["quality"] = write_quality(real, synthetic, ctx.schema, ctx.domain, report, target)
    atomic_write_json(target / "audit.json", audit, private=True)
    atomic_write_bytes(target / "audit.md", render_markdown(audit, audit.get("plots", [])).encode(), private=True)
    if location is not None and is_remote(location):
        # Uploaded to the private place the owner named; never to the (public) run folder.
        names = [p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()]
        RemoteFolder(location).push(target, names)
    where = location if location is not None else f"{ctx.folder.location}/internal-audit"
    ctx.progress(f"audit (INTERNAL, not DP): written to {where}")
    return AuditResult.of(where, audit)


def audit_folder(ctx: RunContext, location: str | None) -> Path:
    """The local folder the internal audit is written to, created owner-only (0700) with its mode.

    None: ``internal-audit/`` of a local run folder (a remote one needs a location: ``check_audit_location``).
    A remote location: the run's private temporary folder, uploaded from there. A local path: itself.
    """
    if location is None:
        target = ctx.folder.file("internal-audit")
    elif is_remote(location):
        target = ctx.private_dir / "internal-audit"
    else:
        target = Path(location)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)  # not DP: owner-only, like every private part of a run
    return target


STAGES = ("discover", "validate", "binarise", "mechanism", "rounding", "report", "audit")


@dataclass(frozen=True)
class RunOutcome:
    """What a run produced. ``run_dir`` is where the run folder lives (a path, or a URL when remote);
    ``local_dir`` holds its files until the caller releases the local copy of a remote folder; ``schema`` is
    the run's (given, or discovered by its discover stage)."""

    run_id: str
    run_dir: str
    local_dir: Path
    privacy: PrivacyRecord
    rounding: RoundingFacts
    report: ReportResult
    audit: AuditResult | None
    schema: Schema

    @property
    def reused(self) -> bool:
        return self.privacy.reused

    def public_summary(self) -> dict:
        """What a run returns to its caller (and the Prefect flow stores): public facts only, as JSON."""
        return {"run_id": self.run_id, "run_dir": self.run_dir,
                "synthetic": f"{self.run_dir}/synthetic.parquet", "rows": self.rounding.rows,
                "sink": self.rounding.sink,
                "privacy": thawed_json(self.privacy.total_cost()),
                "epsilon_statement": self.privacy.spend_line(), "reused_release": self.reused,
                "caveat": self.privacy.caveat,
                "report": self.report.summary,
                "internal_audit": self.audit.location if self.audit is not None else None}


def discard_untouched_folder(ctx: RunContext) -> None:
    """A run refused before any stage finished (the input's columns, its format) leaves no folder holding only
    manifest.json: the manifest goes, and the folder too when the run made it (no --output); nothing was charged
    and there is nothing to resume. Remote folders and folders with any stage's artifact are kept."""
    folder = ctx.folder
    if folder.remote is not None or folder.manifest.get("stages") or folder.manifest.get("attempts", 1) > 1:
        return
    if sorted(p.name for p in folder.path.iterdir()) != ["manifest.json"]:
        return
    (folder.path / "manifest.json").unlink()
    if ctx.plan.parameters.output is None:
        folder.path.rmdir()


def run_discover(ctx: RunContext, runner: Runner) -> DiscoveryOutcome:
    """The discover stage; a refusal it raises after its own charge (e.g. no column kept) names that charge."""
    from privsynth.run.spent import discovery_charged_since, ledger_charges

    discovery = ctx.plan.discovery
    if discovery is None:  # plan_run plans a discovery for every run without a schema
        raise RuntimeError("a run with a schema has no discover stage")
    before = ledger_charges(ctx.ledger, ctx.plan.dataset)
    try:
        return runner("discover", stage_discover, ctx)
    except PrivsynthError as err:
        charged = discovery_charged_since(ctx.ledger, ctx.plan.dataset, before, discovery.rho)
        refusal = truthful_refusal(err, charged, ctx.plan.dataset)
        if refusal is err:
            raise
        raise refusal from None


def execute(ctx: RunContext, runner: Runner = direct) -> RunOutcome:
    """The run, stage by stage; the private folder is deleted whatever happens."""
    try:
        if ctx.plan.schema is None:
            ctx = ctx.with_discovery(run_discover(ctx, runner))
        try:
            validation = runner("validate", stage_validate, ctx)
            statistics = runner("binarise", stage_binarise, ctx, validation)
            privacy = runner("mechanism", stage_mechanism, ctx, statistics)
        except PrivsynthError as err:  # after the discover stage's charge: the message says it stays spent
            refusal = truthful_refusal(err, ctx.discovery, ctx.plan.dataset)
            if refusal is err:
                raise
            raise refusal from None
        rounding = runner("rounding", stage_rounding, ctx, privacy)
        report = runner("report", stage_report, ctx, privacy, rounding)
        audit = runner("audit", stage_audit, ctx, statistics, rounding) if ctx.plan.parameters.audit else None
    except RefusalError:
        discard_untouched_folder(ctx)
        raise
    finally:
        ctx.close()
    folder = ctx.folder
    folder.manifest["privacy_spent"] = thawed_json(privacy.total_cost())
    folder.manifest["epsilon_statement"] = privacy.epsilon_statement
    folder.manifest["outputs"] = {"synthetic": "synthetic.parquet", "privacy": "privacy.json", "report": "report.json",
                                  "synthetic_validation": "synthetic-validation.json",
                                  "sink": rounding.sink,
                                  "internal_audit": None if audit is None else "internal-audit/audit.json"
                                  if ctx.plan.parameters.audit_location is None else "elsewhere (--audit-location)"}
    folder.manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    folder.save()
    phase.enter("finished")
    return RunOutcome(ctx.run_id, folder.location, folder.path, privacy, rounding, report, audit, ctx.schema)
