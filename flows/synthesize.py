"""The privsynth DAG: ingest -> validate -> binarise -> mechanism -> rounding -> audit.

Every parameter is checked before any data is read, and the budget is checked before the data is
read and charged before any noise is drawn. Stages pass artifact paths inside the run folder.
"""

# No `from __future__ import annotations` here: served runs ship this module by value (cloudpickle), and
# Prefect builds the parameter model from the flow's annotations, so RunParameters must be a real class
# in them, not a postponed string ("`SynthesizeModel` is not fully defined").

import time
from pathlib import Path

import pyarrow.parquet as pq
from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from privsynth.config import RunParameters, plan_run
from privsynth.encoding import domain_of
from privsynth.pipeline import ValidationFailedError, precheck_budget
from privsynth.privacy.ledger import BudgetLedger
from privsynth.releases import ReleaseStore, run_release_key
from privsynth.runfolder import RunFolder
from tasks.audit import audit_task
from tasks.binarise import binarise_task
from tasks.ingest import ingest_task
from tasks.mechanism import mechanism_task
from tasks.rounding import rounding_task
from tasks.validate import validate_task


def _run_id() -> str:
    """Stable across retries of one Prefect flow run, so a retry resumes the same folder and release."""
    started = flow_run.get_scheduled_start_time()
    stamp = started.strftime("%Y%m%d-%H%M%S") if started else time.strftime("%Y%m%d-%H%M%S")
    run = flow_run.get_id()
    return f"{stamp}-{str(run)[:6]}" if run else stamp


def _configured(parameters: RunParameters, input_rows: int | None) -> RunParameters:
    """Complete a mechanism's config with public facts and check what its guarantee allows.

    Private sampling states its guarantee for a public n and a bit count p: ``configure_for`` fills
    them (the input's row count is then treated as public, and privacy.json says so) and
    ``check_feasible`` refuses a request the guarantee does not cover. Called once before the data is
    read (the box bound alone already rules out most requests) and again with the row count.
    """
    plan = plan_run(parameters)
    mechanism = plan.mechanism
    if not hasattr(mechanism, "configure_for"):
        return parameters
    config = mechanism.configure_for(plan.mechanism_config, domain_of(plan.schema), input_rows=input_rows)
    mechanism.check_feasible(config)
    options = config.model_dump(mode="json", exclude={"epsilon", "delta"})
    return parameters.model_copy(update={"mechanism_options": options})


def _output_rows(parameters: RunParameters, privacy: dict) -> int | None:
    """Rows to write: --rows, else the release's own DP estimate of n (never the private n).

    An exact release (private sampling) is published as it is: None.
    """
    if privacy.get("exact_release"):
        return None
    if parameters.rows is not None:
        return parameters.rows
    estimate = privacy.get("release_facts", {}).get("n_estimate")
    if estimate is None:
        raise ValueError(f"mechanism {parameters.mechanism} gives no DP estimate of n; pass --rows")
    return max(1, int(round(estimate)))


@flow(name="privsynth-synthesize", log_prints=False, validate_parameters=True)
def synthesize(parameters: RunParameters = RunParameters(), release_store: str | None = None) -> dict:
    """Release a DP synthetic table. Returns the run folder, the outputs and the headline audit figures."""
    logger = get_run_logger()
    plan = plan_run(parameters)
    ledger = BudgetLedger(parameters.ledger)
    cost = plan.mechanism.privacy_cost(plan_run(_configured(parameters, input_rows=None)).mechanism_config)
    precheck_budget(ledger, plan.dataset, cost)  # fails before the data is read when the budget cannot cover this run

    run_id = _run_id()
    run_dir = Path(parameters.output) if parameters.output else Path("runs") / run_id
    run_key = parameters.model_dump(mode="json", exclude={"output"})
    folder = RunFolder.open(run_dir, run_key, run_id)
    run_id = folder.manifest["run_id"]
    folder.manifest.update(parameters=parameters.model_dump(mode="json"), schema={"name": plan.schema.name,
                           "path": plan.schema_path, "sha256": plan.schema.content_hash()}, dataset=plan.dataset)
    folder.save()
    logger.info("run %s: %s on %s at epsilon %g -> %s", run_id, parameters.mechanism, plan.source.describe(),
                parameters.epsilon, run_dir)

    input_hash = ingest_task(parameters, str(run_dir))
    folder = RunFolder.load(run_dir)
    folder.manifest["input"] = {"source": plan.source.describe(), "sha256": input_hash}
    folder.save()
    rows_in = pq.ParquetFile(folder.file("raw.parquet")).metadata.num_rows

    validation = validate_task(parameters, str(run_dir))
    if not validation["success"]:
        raise ValidationFailedError(f"validation failed, nothing was charged: {validation['message']} "
                                    f"(details: {run_dir / 'validation.json'})")
    binarise_task(parameters, str(run_dir))

    mechanism_parameters = _configured(parameters, input_rows=rows_in)
    mechanism_plan = plan_run(mechanism_parameters)
    key = run_release_key(input_hash, plan.schema.content_hash(), parameters.mechanism,
                      mechanism_plan.mechanism_config.model_dump(mode="json"), parameters.seed, run_id)
    store = release_store or str(ReleaseStore().root)
    privacy = mechanism_task(mechanism_parameters, str(run_dir), key, store)

    rounding = rounding_task(parameters, str(run_dir), _output_rows(parameters, privacy), parameters.seed)
    audit = audit_task(parameters, str(run_dir))

    folder = RunFolder.load(run_dir)
    folder.manifest["privacy_spent"] = privacy["cost"]
    folder.manifest["outputs"] = {"synthetic": "synthetic.parquet", "audit": "audit.json", "privacy": "privacy.json",
                                  "sink": rounding.get("sink")}
    folder.manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    folder.save()
    return {"run_id": run_id, "run_dir": str(run_dir), "synthetic": str(run_dir / "synthetic.parquet"),
            "rows": rounding["rows"], "sink": rounding.get("sink"), "privacy": privacy["cost"],
            "reused_release": privacy.get("reused_stored_release", False), "audit_headline": audit["headline"],
            "audit": audit["marginals"]}
