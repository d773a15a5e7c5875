"""Stage 3: bits.parquet (private one-hot bits) and encoding.json (public layout)."""

from prefect import get_run_logger, task

from privsynth.config import RunParameters, plan_run
from privsynth.pipeline import binarise
from privsynth.runfolder import RunFolder
from tasks.common import IO_RETRIES, TASK_DEFAULTS


@task(name="binarise", **TASK_DEFAULTS, **IO_RETRIES)
def binarise_task(parameters: RunParameters, run_dir: str) -> dict:
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    if not folder.stage_done("binarise"):
        domain = binarise(folder.require("raw.parquet"), plan.schema, folder.file("bits.parquet"), folder.file("encoding.json"))
        folder.record("binarise", ["bits.parquet", "encoding.json"])
        get_run_logger().info("binarise: %d attributes, %d one-hot bits", domain.n_attributes, domain.width)
    return folder.manifest["stages"]["binarise"]
