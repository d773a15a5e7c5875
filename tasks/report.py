"""Stage 6: the DP report (the synthetic table against the mechanism's own noisy measurements)."""

from prefect import task

from privsynth.run.stages import stage_report
from tasks.common import IO_RETRIES, TASK_DEFAULTS

report_task = task(stage_report, name="report", **TASK_DEFAULTS, **IO_RETRIES)
