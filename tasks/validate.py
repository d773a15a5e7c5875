"""Stage 2: the schema's expectations on the input; validation.json (public: pass/fail, no values)."""

from prefect import task

from privsynth.run.stages import stage_validate
from tasks.common import IO_RETRIES, TASK_DEFAULTS

validate_task = task(stage_validate, name="validate", **TASK_DEFAULTS, **IO_RETRIES)
