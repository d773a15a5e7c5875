"""Stage 5: randomized rounding and decoding to synthetic.parquet (public, DP); optional sink."""

import numpy as np
import pyarrow.parquet as pq
from prefect import get_run_logger, task

from privsynth.config import RunParameters, plan_run
from privsynth.io import atomic_write_table, write_sink
from privsynth.mechanisms.base import Release
from privsynth.pipeline import fault_point, synthesize_table
from privsynth.runfolder import RunFolder
from tasks.common import IO_RETRIES, TASK_DEFAULTS


@task(name="rounding", **TASK_DEFAULTS, **IO_RETRIES)
def rounding_task(parameters: RunParameters, run_dir: str, rows: int | None, seed: int | None) -> dict:
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    release = Release.from_arrow(pq.read_table(folder.require("release.parquet")))
    # Rounding is post-processing: its randomness needs no secrecy, only reproducibility when seeded.
    rng = np.random.default_rng(None if seed is None else [seed, 1])
    table, _ = synthesize_table(release, plan.schema, rows, rng)
    atomic_write_table(folder.file("synthetic.parquet"), table)
    facts = {"rows": table.num_rows}
    if plan.parameters.sink:
        facts["sink"] = write_sink(table, plan.parameters.sink)
    fault_point("during_rounding")  # test hook: synthetic.parquet written, not yet vouched for by the manifest
    folder.record("rounding", ["synthetic.parquet"], **facts)
    get_run_logger().info("rounding: wrote %d synthetic rows%s", table.num_rows,
                          f" and {facts['sink']}" if "sink" in facts else "")
    return facts
