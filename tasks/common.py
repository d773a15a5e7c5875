"""Shared task settings."""

from prefect.cache_policies import NONE


def _deterministic_errors() -> tuple[type[BaseException], ...]:
    from privsynth.config import ParameterError
    from privsynth.io import InputError
    from privsynth.pipeline import InjectedFault, ValidationFailedError
    from privsynth.privacy.ledger import LedgerError
    from privsynth.runfolder import RunFolderError
    from privsynth.schema import SchemaError

    return (ParameterError, InputError, SchemaError, ValidationFailedError, RunFolderError, LedgerError, InjectedFault)


def retry_transient_only(task, task_run, state) -> bool:  # noqa: ARG001  (Prefect's retry_condition_fn signature)
    """Retry I/O failures, not a bad input: the same file read again fails the same way (three times over)."""
    error = state.data if isinstance(state.data, BaseException) else None
    return not isinstance(error, _deterministic_errors())


# Tasks pass artifact paths; nothing is cached or persisted by Prefect (rows never reach result storage).
TASK_DEFAULTS = dict(cache_policy=NONE, persist_result=False)
IO_RETRIES = dict(retries=2, retry_delay_seconds=1, retry_condition_fn=retry_transient_only)
