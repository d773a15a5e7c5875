"""Stage 2: Great Expectations suite from the schema; validation.json (public: pass/fail, no values)."""

from prefect import get_run_logger, task

from privsynth.config import RunParameters, plan_run
from privsynth.pipeline import validate
from privsynth.runfolder import RunFolder
from tasks.common import IO_RETRIES, TASK_DEFAULTS

# Private copies of the input; a run that fails validation is over, so they are deleted (the
# manifest and validation.json stay as the record of the failure).
PRIVATE_COPIES = ["raw.parquet", "bits.parquet"]


@task(name="validate", **TASK_DEFAULTS, **IO_RETRIES)
def validate_task(parameters: RunParameters, run_dir: str) -> dict:
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    outcome = validate(folder.require("raw.parquet"), plan.schema, folder.file("validation.json"))
    folder.record("validate", ["validation.json"], success=outcome["success"])
    logger = get_run_logger()
    if outcome["success"]:
        logger.info("validate: every expectation of schema %r passed", plan.schema.name)
    else:
        folder.discard(PRIVATE_COPIES, "the input failed validation")
        logger.error("validate: %s", outcome["message"])
    return outcome
