"""Shared task settings."""

from prefect.cache_policies import NONE

# Tasks pass artifact paths; nothing is cached or persisted by Prefect (rows never reach result storage).
TASK_DEFAULTS = dict(cache_policy=NONE, persist_result=False)
IO_RETRIES = dict(retries=2, retry_delay_seconds=1)
