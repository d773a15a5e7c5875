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

    A plain class on purpose: Prefect walks dataclasses and pydantic models passed to tasks.
    """

    def __init__(self, plan: RunPlan, data: Any, folder: RunFolder, ledger, store, *, run_id: str,
                 keep_private: bool = False, progress: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.data = data
        self.folder = folder
        self.ledger = ledger
        self.store = store
        self.run_id = run_id
        self.keep_private = keep_private
        self.progress = progress or (lambda line: logger.info("%s", line))
        sweep_private_leftovers()
        self.private_dir = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))
        os.chmod(self.private_dir, 0o700)
        self._handle = None  # the engine source, opened on first use
        self.discovery = None  # the discover stage's outcome (privsynth.run.discover), when the run has no schema
        # Set by the validate stage on a budgeted dataset: records failing the schema are dropped (a per-record
        # map), never a refusal that would make the release's existence an exact check (stage_validate).
        self.drop_faulty_records = False

    @property
    def schema(self) -> Schema:
        """The run's schema: the plan's, or the discovered one once ``complete_plan`` has run."""
        if self.plan.schema is None:
            raise RuntimeError("the run's schema is not known before its discover stage")
        return self.plan.schema

    @property
    def domain(self) -> Domain:
        return domain_of(self.schema)

    def handle(self):
        """The engine's source of the input (``privsynth.engine.datasource.open_data``), opened once."""
        if self._handle is None:
            self._handle = open_data(self.data, self.schema)
        self._handle.drop_faulty_records = self.drop_faulty_records
        return self._handle

    def close(self) -> None:
        """Delete the private intermediates (unless kept for debugging)."""
        if self._handle is not None:
            self._handle.close()
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
