"""Shared task settings."""

from prefect.cache_policies import NONE


def _deterministic_errors() -> tuple[type[BaseException], ...]:
    from privsynth.errors import KNOWN_ERRORS, InjectedFault

    return (*KNOWN_ERRORS, InjectedFault)


def retry_transient_only(task, task_run, state) -> bool:  # noqa: ARG001  (Prefect's retry_condition_fn signature)
    """Retry I/O failures, not a bad input: the same file read again fails the same way (three times over)."""
    try:
        error = state.result(raise_on_failure=False)
    except Exception as exc:  # noqa: BLE001
        error = exc
    return not isinstance(error, _deterministic_errors())


# Nothing is cached or persisted by Prefect (private values never reach result storage).
TASK_DEFAULTS = dict(cache_policy=NONE, persist_result=False, log_prints=False)
IO_RETRIES = dict(retries=2, retry_delay_seconds=1, retry_condition_fn=retry_transient_only)
