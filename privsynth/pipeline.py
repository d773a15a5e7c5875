"""The stages of a run as plain functions, and the one orchestration every caller uses.

``execute(context, runner)`` runs validate -> binarise -> mechanism -> rounding -> report (-> the
opt-in internal audit). ``privsynth.synthesize`` calls it with ``direct`` (each stage a plain call);
the Prefect flow calls it with a runner that submits each stage as its task from ``tasks/``; the
CLI calls the flow. So the privacy rules below are written once:

* every parameter is checked (``privsynth.config.plan_run``) and the budget pre-checked before the
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
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privsynth.config import RunPlan
from privsynth.engine.datasource import ValidationFailedError, open_data
from privsynth.schema.encoding import Domain, arrow_schema, decode_codes, domain_of, encode_codes, one_hot_names
from privsynth.io import atomic_write_bytes, atomic_write_json, atomic_write_table
from privsynth.mechanisms.base import Release
from privsynth.privacy.accounting import PrivacyCost
from privsynth.rounding import round_release
from privsynth.runfolder import RunFolder
from privsynth.schema import Schema
from privsynth.schema.workload import Histogram

logger = logging.getLogger("privsynth")

__all__ = ["ValidationFailedError", "RunContext", "execute", "direct", "STAGES"]


# ---------------------------------------------------------------- test hook: simulated crashes

FAULT_ENV = "PRIVSYNTH_FAULT_INJECT"
FAULT_POINTS = ("after_charge", "after_noise_claimed", "after_release_stored", "during_rounding", "before_report")


class InjectedFault(RuntimeError):
    """Raised by :func:`fault_point` in its in-process mode (tests only)."""


def fault_point(name: str) -> None:
    """TEST HOOK (no effect in normal runs): simulate a crash at the named point of a run.

    With ``PRIVSYNTH_FAULT_INJECT=<name>`` the process dies on the spot with ``os._exit(137)``, as a
    SIGKILL or an out-of-memory kill would. With ``PRIVSYNTH_FAULT_INJECT=raise:<name>`` it raises
    :class:`InjectedFault` instead (for in-process tests).
    """
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted == name:
        os._exit(137)
    if wanted == f"raise:{name}":
        raise InjectedFault(f"injected fault at {name!r}")


# ---------------------------------------------------------------- the run's context

class RunContext:
    """Everything a stage needs: the checked plan, the input, the run folder, ledger and store.

    A plain class on purpose: Prefect walks dataclasses and pydantic models passed to tasks.
    """

    def __init__(self, plan: RunPlan, data: Any, folder: RunFolder, ledger, store, *, run_id: str,
                 keep_private: bool = False, progress: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.data = data
        self.folder = folder
        self.ledger = ledger
        self.store = store
        self.run_id = run_id
        self.keep_private = keep_private
        self.progress = progress or (lambda line: logger.info("%s", line))
        sweep_private_leftovers()
        self.private_dir = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))
        os.chmod(self.private_dir, 0o700)
        self._handle = None  # the engine source, opened on first use

    @property
    def schema(self) -> Schema:
        return self.plan.schema

    @property
    def domain(self) -> Domain:
        return domain_of(self.plan.schema)

    def handle(self):
        """The engine's source of the input (``privsynth.engine.datasource.open_data``), opened once."""
        if self._handle is None:
            self._handle = open_data(self.data, self.schema)
        return self._handle

    def close(self) -> None:
        """Delete the private intermediates (unless kept for debugging)."""
        if self._handle is not None:
            self._handle.close()
        if self.keep_private:
            self.progress(f"private intermediates KEPT for debugging in {self.private_dir} (delete them when done)")
            return
        shutil.rmtree(self.private_dir, ignore_errors=True)


Runner = Callable[..., Any]

PRIVATE_PREFIX = "privsynth-private-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_private_leftovers() -> list[str]:
    """Delete the private folders of runs whose process is gone (a killed run cannot clean up after itself).

    Folder names carry the owning process id; a folder of a live process, or one not named that way,
    is left alone.
    """
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{PRIVATE_PREFIX}*"):
        pid_text = folder.name[len(PRIVATE_PREFIX):].split("-", 1)[0]
        if pid_text.isdigit() and not _alive(int(pid_text)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


def direct(name: str, stage: Callable[..., Any], *args: Any) -> Any:
    """The plain runner: each stage is a function call."""
    return stage(*args)


# ---------------------------------------------------------------- validate

def stage_validate(ctx: RunContext) -> dict:
    """The schema's expectations on the input; validation.json (public: pass/fail, no values).

    Also refuses a delta that is not below 1/n, without stating n (n is private).
    """
    from privsynth.config import check_delta_against_rows

    handle = ctx.handle()
    report = handle.validate()
    atomic_write_json(ctx.folder.file("validation.json"), report.public_json())
    ctx.folder.record("validate", ["validation.json"], success=report.success)
    if not report.success:
        message = "; ".join(report.public_failure_message().splitlines())
        raise ValidationFailedError(f"validation failed, nothing was charged: {message} "
                                    f"(details: {ctx.folder.file('validation.json')})")
    check_delta_against_rows(ctx.plan.delta, report.row_count)
    ctx.progress(f"validate: every expectation of schema {ctx.schema.name!r} passed")
    return {"success": True}


# ---------------------------------------------------------------- binarise (statistics)

def stage_binarise(ctx: RunContext, validation: dict) -> Path:
    """encoding.json (public layout) and the histogram of level codes (private, in the private folder)."""
    if not validation.get("success"):
        raise ValidationFailedError("binarise needs a validated input")
    domain = ctx.domain
    atomic_write_json(ctx.folder.file("encoding.json"), {
        "encoding": "one-hot",
        "domain": domain.to_json(),
        "one_hot_columns": one_hot_names(ctx.schema),
        "columns": [{"name": c.name, "type": c.type, "levels": list(c.labels)} for c in ctx.schema.kept_columns],
        "numeric_decoding": "a value drawn uniformly inside its bin (integers: uniformly among the bin's integers)",
    })
    ctx.folder.record("binarise", ["encoding.json"])
    histogram = ctx.handle().histogram()
    path = ctx.private_dir / "histogram.parquet"
    write_histogram(path, histogram, domain)
    ctx.progress(f"binarise: {domain.n_attributes} attributes, {domain.width} one-hot levels")
    return path


def write_histogram(path: Path, histogram: Histogram, domain: Domain) -> None:
    columns = {name: pa.array(histogram.codes[:, j].astype(np.int32)) for j, name in enumerate(domain.names)}
    columns["__count__"] = pa.array(histogram.counts.astype(np.int64))
    atomic_write_table(path, pa.table(columns))


def read_histogram(path: Path, domain: Domain) -> Histogram:
    table = pq.read_table(path)
    codes = np.column_stack([table.column(n).to_numpy() for n in domain.names]) if table.num_rows else \
        np.zeros((0, domain.n_attributes), dtype=np.int32)
    return Histogram(codes.astype(np.int64), table.column("__count__").to_numpy().astype(np.int64))


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


@dataclass(frozen=True)
class ReleaseOutcome:
    release: Release
    privacy: dict
    reused: bool


def release_stage(*, mechanism: ModuleType, config, statistics: Histogram, domain: Domain, key: str, store, ledger,
                  dataset: str, delta: float, seed: int | None, column_names: list[str],
                  require_budget: bool = True) -> ReleaseOutcome:
    """Produce (or reuse) the DP release under DESIGN section 5's rules.

    1. A release already stored under ``key`` is reused: no noise is drawn and nothing is charged.
    2. Otherwise the ledger is charged *before* any noise is drawn (idempotent per key, never
       refunded), then the draw is claimed in the ledger (``claim_noise``: refused if noise was ever
       drawn for this key, so a lost release is never re-drawn for free), and only then does the
       noise source accept draws.
    3. The release is stored atomically under ``key`` before anyone reads it.
    """
    from privsynth.privacy.noise import make_noise_source

    found = store.get(key)
    if found is not None:
        release, privacy = found
        return ReleaseOutcome(release, privacy, reused=True)
    cost = mechanism.privacy_cost(config)
    receipt = ledger.charge(dataset, key, cost, f"{mechanism.NAME} release", require_budget=require_budget)
    fault_point("after_charge")
    ledger.claim_noise(dataset, key)
    fault_point("after_noise_claimed")
    noise = make_noise_source(seed, key)
    noise.authorize(receipt.reference)
    data = mechanism.collect_statistics(statistics, domain, config)
    release = mechanism.run(data, domain, config, noise)
    release.check_domain(domain)
    privacy = privacy_record(mechanism, config, cost, delta, noise, dataset, charged_now=not receipt.reused,
                             release=release)
    store.put(key, release, column_names, privacy)
    fault_point("after_release_stored")
    return ReleaseOutcome(release, privacy, reused=False)


def privacy_record(mechanism: ModuleType, config, cost: PrivacyCost, delta: float, noise, dataset: str, *,
                   charged_now: bool, release: Release) -> dict:
    """privacy.json: what was spent and under which guarantee. No key, hash or count of the data."""
    record = {
        "visibility": "public (DP)",
        "mechanism": mechanism.NAME,
        "config": config.model_dump(mode="json"),
        "cost": cost.report(delta),
        "epsilon_statement": epsilon_statement(cost, delta),
        "noise": noise.describe(),
        "ledger": {"dataset": dataset, "charged_now": charged_now},
        "release_facts": release.public_facts,
        "exact_release": release.exact,
        "neighbouring_datasets": getattr(mechanism, "NEIGHBOURS", "add or remove one record"),
    }
    if hasattr(mechanism, "check_feasible"):
        # Private sampling: what its guarantee allows for this p, d, declared n and epsilon (config-only facts).
        record["feasibility"] = mechanism.check_feasible(config).to_json()
    return record


def epsilon_statement(cost: PrivacyCost, delta: float | None) -> str:
    """The one wording of a cost used everywhere (summary, privacy.json, budget show)."""
    if not cost.is_dp:
        return "NOT differentially private"
    parts = []
    if cost.pure_epsilon is not None:
        parts.append(f"pure epsilon {cost.pure_epsilon:.4g}")
    if delta is not None:
        parts.append(f"epsilon {cost.epsilon_at(delta):.4g} at delta {delta:g}")
    parts.append(f"rho {cost.rho:.4g} (zCDP)")
    return "; ".join(parts)


def stage_mechanism(ctx: RunContext, statistics_path: Path) -> dict:
    """Charge, draw (or reuse) and persist the release; release.parquet, measurements, privacy.json."""
    from privsynth.privacy.keys import data_fingerprint, release_key

    plan = ctx.plan
    domain = ctx.domain
    histogram = read_histogram(statistics_path, domain)
    secret = ctx.ledger.release_secret()
    key = release_key(secret, data_fingerprint(secret, histogram), ctx.schema.content_hash(), plan.mechanism.NAME,
                      plan.mechanism_config.model_dump(mode="json"), plan.parameters.seed,
                      None if plan.parameters.seed is not None else ctx.run_id)
    ctx.folder.note(release_key=key)  # an HMAC under the ledger's secret: no test of guesses without it
    names = one_hot_names(ctx.schema)
    ctx.progress(f"mechanism: {plan.mechanism.NAME} at {epsilon_statement(plan.cost, plan.delta)}")
    outcome = release_stage(mechanism=plan.mechanism, config=plan.mechanism_config, statistics=histogram,
                            domain=domain, key=key, store=ctx.store, ledger=ctx.ledger, dataset=plan.dataset,
                            delta=plan.delta, seed=plan.parameters.seed, column_names=names,
                            require_budget=not plan.unlimited)
    atomic_write_table(ctx.folder.file("release.parquet"), outcome.release.to_arrow(names))
    artifacts = ["release.parquet", "privacy.json"]
    if outcome.release.measurements:
        from privsynth.releases import measurements_table

        atomic_write_table(ctx.folder.file("measurements.parquet"), measurements_table(outcome.release.measurements))
        artifacts.append("measurements.parquet")
    privacy = dict(outcome.privacy, reused_stored_release=outcome.reused)
    atomic_write_json(ctx.folder.file("privacy.json"), privacy)
    ctx.folder.record("mechanism", artifacts, privacy_spent=privacy["cost"], reused_stored_release=outcome.reused)
    ctx.progress("mechanism: reused the stored release of this run; nothing charged" if outcome.reused else
                 f"mechanism: release charged to dataset {plan.dataset!r} and stored")
    return privacy


# ---------------------------------------------------------------- rounding

def output_rows(rows: int | None, privacy: dict) -> int | None:
    """Rows to write: the requested count, else the release's own DP estimate of n (never the private n).

    An exact release (private sampling) is published as it is: None.
    """
    if privacy.get("exact_release"):
        return None
    if rows is not None:
        return rows
    estimate = privacy.get("release_facts", {}).get("n_estimate")
    if estimate is None:
        raise ValueError(f"mechanism {privacy.get('mechanism')} gives no DP estimate of n; pass rows")
    return max(1, int(round(estimate)))


def synthesize_table(release: Release, schema: Schema, rows: int | None, rng: np.random.Generator) -> pa.Table:
    """Records in the original schema from a release (post-processing, free)."""
    codes = round_release(release, domain_of(schema), rows, rng)
    frame = decode_codes(codes, schema, rng)
    return pa.Table.from_pandas(frame, schema=arrow_schema(schema), preserve_index=False)


def rounding_rng(seed: int | None, draw: int = 0) -> np.random.Generator:
    """Post-processing randomness: needs no secrecy, only reproducibility when seeded."""
    return np.random.default_rng(None if seed is None else [seed, 1, draw])


def stage_rounding(ctx: RunContext, privacy: dict) -> dict:
    """synthetic.parquet in the schema's types (and the optional sink): post-processing of the release."""
    from privsynth.io import write_sink

    release = Release.from_arrow(pq.read_table(ctx.folder.require("release.parquet")))
    table = synthesize_table(release, ctx.schema, output_rows(ctx.plan.parameters.rows, privacy),
                             rounding_rng(ctx.plan.parameters.seed))
    atomic_write_table(ctx.folder.file("synthetic.parquet"), table)
    facts: dict = {"rows": table.num_rows}
    if ctx.plan.parameters.sink:
        facts["sink"] = write_sink(table, ctx.plan.parameters.sink)
    fault_point("during_rounding")
    ctx.folder.record("rounding", ["synthetic.parquet"], **facts)
    ctx.progress(f"rounding: wrote {table.num_rows} synthetic rows" + (f" and {facts['sink']}" if "sink" in facts else ""))
    return facts


# ---------------------------------------------------------------- the DP report and the internal audit

def stage_report(ctx: RunContext, privacy: dict, rounding: dict) -> dict:
    """report.json / report.md: the synthetic table against the release's own noisy measurements (DP, free)."""
    from privsynth.report.dp_report import dp_report, render_report

    fault_point("before_report")
    release = Release.from_arrow(pq.read_table(ctx.folder.require("release.parquet")))
    measurements = ()
    if ctx.folder.trusted("measurements.parquet"):
        from privsynth.releases import measurements_from_table

        measurements = measurements_from_table(pq.read_table(ctx.folder.file("measurements.parquet")))
    synthetic = encode_codes(pq.read_table(ctx.folder.require("synthetic.parquet")).to_pandas(), ctx.schema)
    report = dp_report(release, measurements, synthetic, ctx.schema, privacy)
    atomic_write_json(ctx.folder.file("report.json"), report)
    atomic_write_bytes(ctx.folder.file("report.md"), render_report(report).encode())
    ctx.folder.record("report", ["report.json", "report.md"])
    return report


def stage_audit(ctx: RunContext, statistics_path: Path, rounding: dict) -> dict:
    """INTERNAL (not DP), opt-in: the synthetic table against the real one, in ``internal-audit/``."""
    from privsynth.report.internal_audit import build_audit, render_markdown

    target = ctx.folder.file("internal-audit")
    target.mkdir(exist_ok=True)
    histogram = read_histogram(statistics_path, ctx.domain)
    real = np.concatenate(list(histogram.iter_codes())) if histogram.codes.shape[0] else \
        np.zeros((0, ctx.domain.n_attributes), dtype=np.int64)
    synthetic = encode_codes(pq.read_table(ctx.folder.require("synthetic.parquet")).to_pandas(), ctx.schema)
    audit = build_audit(real, synthetic, ctx.schema, ctx.domain, target, target_column=ctx.plan.parameters.audit_target)
    atomic_write_json(target / "audit.json", audit)
    atomic_write_bytes(target / "audit.md", render_markdown(audit, audit.get("plots", [])).encode())
    ctx.folder.publish([f"internal-audit/{p.name}" for p in target.iterdir() if p.is_file()])
    ctx.progress(f"audit (INTERNAL, not DP): written to {ctx.folder.location}/internal-audit")
    return audit


STAGES = ("validate", "binarise", "mechanism", "rounding", "report", "audit")


@dataclass(frozen=True)
class RunOutcome:
    """What a run produced. ``run_dir`` is where the run folder lives (a path, or a URL when remote);
    ``local_dir`` holds its files until the caller releases the local copy of a remote folder."""

    run_id: str
    run_dir: str
    local_dir: Path
    privacy: dict
    rounding: dict
    report: dict
    audit: dict | None

    @property
    def reused(self) -> bool:
        return bool(self.privacy.get("reused_stored_release"))


def execute(ctx: RunContext, runner: Runner = direct) -> RunOutcome:
    """The run, stage by stage; the private folder is deleted whatever happens."""
    try:
        validation = runner("validate", stage_validate, ctx)
        statistics = runner("binarise", stage_binarise, ctx, validation)
        privacy = runner("mechanism", stage_mechanism, ctx, statistics)
        rounding = runner("rounding", stage_rounding, ctx, privacy)
        report = runner("report", stage_report, ctx, privacy, rounding)
        audit = runner("audit", stage_audit, ctx, statistics, rounding) if ctx.plan.parameters.audit else None
    finally:
        ctx.close()
    folder = ctx.folder
    folder.manifest["privacy_spent"] = privacy["cost"]
    folder.manifest["epsilon_statement"] = privacy.get("epsilon_statement")
    folder.manifest["outputs"] = {"synthetic": "synthetic.parquet", "privacy": "privacy.json", "report": "report.json",
                                  "sink": rounding.get("sink"),
                                  "internal_audit": "internal-audit/audit.json" if audit is not None else None}
    folder.manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    folder.save()
    return RunOutcome(ctx.run_id, folder.location, folder.path, privacy, rounding, report, audit)


# ---------------------------------------------------------------- before the data: plan, budget, folder

def resumed_release_key(location: str, run_key: dict) -> str | None:
    """The release key an earlier attempt of the same run recorded in its manifest, if any."""
    from privsynth.io.storage import RemoteFolder, is_remote

    try:
        if is_remote(location):
            remote = RemoteFolder(location)
            previous = json.loads(remote.read_bytes("manifest.json")) if remote.exists("manifest.json") else None
        else:
            path = Path(location) / "manifest.json"
            previous = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None
    if not previous or previous.get("run_key") != json.loads(json.dumps(run_key, default=str)):
        return None
    return previous.get("facts", {}).get("release_key")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


def prepare_run(parameters, *, data: Any = None, schema: Schema | None = None, run_id: str | None = None,
                release_store: str | Path | None = None, progress: Callable[[str], None] | None = None) -> RunContext:
    """Everything before the data is touched: checked plan, budget pre-check, run folder, ledger, store.

    ``data`` is an in-memory table (the Python API) or None (the plan's ``input`` URL, or the bundled
    example). Raises the typed errors of ``privsynth.errors`` on the first problem; nothing is read,
    written or charged then (except the run folder's creation).
    """
    from privsynth.config import plan_run
    from privsynth.privacy.ledger import BudgetLedger
    from privsynth.releases import ReleaseStore

    plan = plan_run(parameters, schema=schema, in_memory=data is not None)
    say = progress or (lambda line: logger.info("%s", line))
    ledger = BudgetLedger(parameters.ledger)
    run_id = run_id or new_run_id()
    location = parameters.output or str(Path("runs") / run_id)
    run_key = parameters.model_dump(mode="json", exclude={"output"})
    if parameters.public_rows is not None:  # a stated, public n: the forecast costs nothing
        from privsynth.report.forecast import forecast, format_forecast

        say(format_forecast(forecast(plan.mechanism.NAME, plan.cost, parameters.epsilon, parameters.delta,
                                     domain_of(plan.schema), parameters.public_rows)))
    say(precheck_budget(ledger, plan.dataset, plan.cost, unlimited=plan.unlimited,
                        seeded=parameters.seed is not None, allow_seed_with_budget=parameters.allow_seed_with_budget,
                        resumed_key=resumed_release_key(location, run_key)))
    folder = RunFolder.open_at(location, run_key, run_id)
    run_id = folder.manifest["run_id"]
    folder.manifest.update(parameters=parameters.public_json(), dataset=plan.dataset,
                           schema={"name": plan.schema.name, "path": plan.schema_path,
                                   "sha256": plan.schema.content_hash()},
                           input={"source": plan.source.describe() if plan.source is not None else
                                  "in-memory table (Python API)"})
    folder.save()
    if data is None:
        from privsynth.config import bundled_example

        data = parameters.input or bundled_example()[0]
    return RunContext(plan, data, folder, ledger, ReleaseStore(release_store), run_id=run_id,
                      keep_private=parameters.keep_private, progress=say)


# ---------------------------------------------------------------- before the data: the budget

def precheck_budget(ledger, dataset: str, cost: PrivacyCost, *, unlimited: bool, seeded: bool,
                    allow_seed_with_budget: bool, resumed_key: str | None = None) -> str:
    """Refuse a run the dataset's budget cannot cover, before any data is read; returns a log line.

    * A dataset without a budget is refused unless the spend without limit is explicit (``unlimited``).
    * A seed on a dataset with a budget is refused unless ``allow_seed_with_budget``: seeded noise is a
      testing feature (reproducible numpy streams, not hardened against floating-point attacks).
    * A resumed run whose release key is already charged is not counted twice.
    The binding check stays the ledger's transactional charge in the mechanism stage.
    """
    from privsynth.privacy.ledger import (BudgetExceededError, BudgetNotSetError, NonPrivateChargeError,
                                          UnknownDatasetError)
    from privsynth.privacy.spending import fits_budget

    try:
        status = ledger.status(dataset)[0]
    except UnknownDatasetError:
        status = None
    if status is None or status.epsilon is None:
        if not unlimited:
            raise BudgetNotSetError(
                f"dataset {dataset!r} has no privacy budget; set one with `privsynth budget set {dataset} --epsilon E` "
                "or spend without a limit explicitly with --unlimited (nothing was read or charged)")
        return f"dataset {dataset!r} has no budget: spending WITHOUT A LIMIT (explicitly allowed)"
    if seeded and not allow_seed_with_budget:
        raise BudgetNotSetError(
            f"dataset {dataset!r} has a privacy budget and --seed was given: seeded noise is a testing feature "
            "(reproducible, not hardened against floating-point attacks); omit --seed, or pass "
            "--allow-seed-with-budget to accept it (nothing was read or charged)")
    if resumed_key is not None and ledger.find_charge(dataset, resumed_key) is not None:
        return f"dataset {dataset!r}: this run's release is already charged; resuming without a new charge"
    if not cost.is_dp:
        raise NonPrivateChargeError(f"dataset {dataset!r} has a privacy budget; a release with no DP guarantee "
                                    "cannot be charged to it")
    if status.delta is None and cost.pure_epsilon is None:
        raise BudgetExceededError(
            f"dataset {dataset!r} has a pure-DP budget (no delta) and this mechanism is zCDP; set the budget with a "
            f"delta (`privsynth budget set {dataset} --epsilon E`, delta defaults to 1e-9) or use a pure-DP mechanism "
            "(nothing was read or charged)")
    costs = [record.cost() for record in ledger.history(dataset)] + [cost]
    if not fits_budget(costs, status.epsilon, status.delta):
        needed = cost.pure_epsilon if status.delta is None else cost.epsilon_at(status.delta)
        raise BudgetExceededError(
            f"dataset {dataset!r}: this run needs epsilon {needed:.4g} but only {status.remaining_epsilon:.4g} of "
            f"{status.epsilon:g} remains (spent {status.spent_epsilon:.4g}); nothing was read or charged")
    return f"dataset {dataset!r}: epsilon {status.remaining_epsilon:.4g} of {status.epsilon:g} remains before this run"
