"""Stage 5: randomized rounding and decoding to synthetic.parquet (public, DP); optional sink."""

from prefect import task

from privsynth.run.stages import stage_rounding
from tasks.common import IO_RETRIES, TASK_DEFAULTS

rounding_task = task(stage_rounding, name="rounding", **TASK_DEFAULTS, **IO_RETRIES)
