"""Progress of a mechanism's run, for a caller's progress bar or log (public facts only).

A mechanism reports objects with a ``describe()`` line (``Progress``) to the hook its caller set with
``reporting_progress``; what a report may hold is the mechanism's to state (AIM: ``aim.progress``),
and never a count, a score or a model answer. The hook is a context variable, so the mechanism's
contract ``run(statistics, domain, config, noise)`` is kept and callers that set nothing pay nothing.
An exception raised by the hook is logged and ignored: the budget is charged when a mechanism runs,
and a failing progress bar must not waste it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

logger = logging.getLogger("privsynth.mechanisms")


class Progress(Protocol):
    def describe(self) -> str: ...


ProgressHook = Callable[[Progress], None]

progress_hook: ContextVar[ProgressHook | None] = ContextVar("privsynth_mechanism_progress", default=None)


@contextmanager
def reporting_progress(hook: ProgressHook | None) -> Iterator[None]:
    """Within the block, a mechanism's ``run`` reports to ``hook`` (None: no reports)."""
    token = progress_hook.set(hook)
    try:
        yield
    finally:
        progress_hook.reset(token)


def report(hook: ProgressHook | None, progress: Progress) -> None:
    """Call the hook; an exception there is logged, never raised (see the module docstring)."""
    if hook is None:
        return
    try:
        hook(progress)
    except Exception:  # noqa: BLE001 - a progress display must not abort a charged release
        logger.warning("progress hook failed; the run goes on", exc_info=True)
