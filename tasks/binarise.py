"""Stage 3: encoding.json (public layout) and the private histogram of level codes."""

from prefect import task

from privsynth.run.stages import stage_binarise
from tasks.common import IO_RETRIES, TASK_DEFAULTS

binarise_task = task(stage_binarise, name="binarise", **TASK_DEFAULTS, **IO_RETRIES)
