"""Stage 4: the private mechanism. Never retried: a retry must not draw fresh noise (docs/design.md 5.3)."""

from prefect import task

from privsynth.run.stages import stage_mechanism
from tasks.common import TASK_DEFAULTS

mechanism_task = task(stage_mechanism, name="mechanism", retries=0, **TASK_DEFAULTS)
