"""Stage 1 without a schema: discover the domain under DP. Never retried: it charges and draws noise."""

from prefect import task

from privsynth.run.discover import stage_discover
from tasks.common import TASK_DEFAULTS

discover_task = task(stage_discover, name="discover", retries=0, **TASK_DEFAULTS)
