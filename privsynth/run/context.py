"""The run's context: the checked plan, the input, the run folder, ledger and store, and the
owner-only private folder of the run's intermediates (deleted when the run ends; a killed run's
folder is swept by the next run).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privsynth.engine.datasource import open_data
from privsynth.run.plan import RunPlan
from privsynth.run.runfolder import RunFolder
from privsynth.schema import Schema
from privsynth.schema.encoding import Domain, domain_of

logger = logging.getLogger("privsynth")


class RunContext:
    """Everything a stage needs: the checked plan, the input, the run folder, ledger and store.

    Read-only once made: a stage returns its result and never changes the context. The discover stage's
    outcome gives a new context (``with_discovery``) holding the completed plan; it shares this one's
    private folder and opened input, so closing either closes both.
    A plain class on purpose: Prefect walks dataclasses and pydantic models passed to tasks.
    """

    def __init__(self, plan: RunPlan, data: Any, folder: RunFolder, ledger, store, *, run_id: str,
                 keep_private: bool = False, progress: Callable[[str], None] | None = None) -> None:
        sweep_private_leftovers()
        private_dir = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))
        os.chmod(private_dir, 0o700)
        values = {"plan": plan, "data": data, "folder": folder, "ledger": ledger, "store": store, "run_id": run_id,
                  "keep_private": keep_private, "progress": progress or (lambda line: logger.info("%s", line)),
                  "private_dir": private_dir,
                  "discovery": None,  # the discover stage's outcome (privsynth.run.discover), when it had no schema
                  "_opened": {}}  # the engine source of the input, opened on first use; shared by with_discovery
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the run's context is read-only ({name!r}): a stage returns its result instead")

    plan: RunPlan
    data: Any
    folder: RunFolder
    ledger: Any
    store: Any
    run_id: str
    keep_private: bool
    progress: Callable[[str], None]
    private_dir: Path
    discovery: Any

    def with_discovery(self, outcome) -> RunContext:
        """This run's context once its discover stage decided the schema: the plan completed with it."""
        from privsynth.run.plan import complete_plan

        completed = object.__new__(RunContext)
        completed.__dict__.update(self.__dict__, plan=complete_plan(self.plan, outcome.schema, outcome.rho),
                                  discovery=outcome)
        return completed

    @property
    def schema(self) -> Schema:
        """The run's schema: the plan's, or the discovered one (``with_discovery``)."""
        if self.plan.schema is None:
            raise RuntimeError("the run's schema is not known before its discover stage")
        return self.plan.schema

    @property
    def domain(self) -> Domain:
        return domain_of(self.schema)

    def handle(self, drop_faulty_records: bool = False):
        """The engine's source of the input (``privsynth.engine.datasource.open_data``), opened once;
        ``drop_faulty_records``: whether its statistics leave out the records failing the schema (the
        validate stage's ``ValidationResult``)."""
        opened = self.__dict__["_opened"]
        if "source" not in opened:
            opened["source"] = open_data(self.data, self.schema)
        opened["source"].drop_faulty_records = drop_faulty_records
        return opened["source"]

    def close(self) -> None:
        """Delete the private intermediates (unless kept for debugging)."""
        source = self.__dict__["_opened"].pop("source", None)
        if source is not None:
            source.close()
        if self.keep_private:
            self.progress(f"private intermediates KEPT for debugging in {self.private_dir} (delete them when done)")
            return
        shutil.rmtree(self.private_dir, ignore_errors=True)


Runner = Callable[..., Any]


PRIVATE_PREFIX = "privsynth-private-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_private_leftovers() -> list[str]:
    """Delete the private folders of runs whose process is gone (a killed run cannot clean up after itself).

    Folder names carry the owning process id; a folder of a live process, or one not named that way,
    is left alone.
    """
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{PRIVATE_PREFIX}*"):
        pid_text = folder.name[len(PRIVATE_PREFIX):].split("-", 1)[0]
        if pid_text.isdigit() and not _alive(int(pid_text)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed


def direct(name: str, stage: Callable[..., Any], *args: Any) -> Any:
    """The plain runner: each stage is a function call."""
    return stage(*args)
