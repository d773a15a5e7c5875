"""Stage 1: read the source into raw.parquet (private)."""

from prefect import get_run_logger, task

from privsynth.config import ParameterError, RunParameters, check_delta_against_rows, plan_run
from privsynth.pipeline import ingest
from privsynth.runfolder import RunFolder
from tasks.common import IO_RETRIES, TASK_DEFAULTS


@task(name="ingest", **TASK_DEFAULTS, **IO_RETRIES)
def ingest_task(parameters: RunParameters, run_dir: str) -> str:
    """Returns the input content hash. The row count stays out of logs (it is private)."""
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    if folder.stage_done("ingest"):
        get_run_logger().info("ingest: reusing raw.parquet from an earlier attempt of this run")
        return folder.manifest["stages"]["ingest"]["input_hash"]
    result = ingest(plan.source, plan.schema, folder.file("raw.parquet"))
    folder.record("ingest", ["raw.parquet"], input_hash=result.input_hash, source=plan.source.describe(),
                  unexpected_columns=list(result.extra_columns))
    try:
        # Checked here, not after the task, so that a refused run leaves no private copy behind.
        check_delta_against_rows(plan.parameters.delta, result.rows)
    except ParameterError:
        folder.discard(["raw.parquet"], "delta is not below 1/n; the run was refused before validation")
        raise
    get_run_logger().info("ingest: wrote raw.parquet from %s", plan.source.describe())
    return result.input_hash
