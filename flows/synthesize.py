"""The privsynth DAG: validate -> binarise -> mechanism -> rounding -> report (-> internal audit).

The flow is a thin caller of ``privsynth.run.stages.execute``, the same orchestration the Python API
runs, with each stage submitted as its task from ``tasks/``: one code path. Every parameter is
checked and the budget pre-checked before the data is read; the ledger is charged before any noise.

What the Prefect UI shows is public: the privacy spent, the release's size, links to the outputs
and the DP report. The internal audit (opt-in) stays on disk and never reaches Prefect.
"""

# No `from __future__ import annotations` here: served runs ship this module by value (cloudpickle), and
# Prefect builds the parameter model from the flow's annotations, so RunParameters must be a real class
# in them, not a postponed string ("`SynthesizeModel` is not fully defined").

import logging
import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.concurrency.sync import concurrency
from prefect.events import emit_event
from prefect.runtime import flow_run
from prefect.states import Failed

from privsynth.api import forwarded_progress
from privsynth.errors import (
    KNOWN_ERRORS,
    BudgetExceededError,
    BudgetNotSetError,
    InfeasibleRequestError,
    NoiseAlreadyDrawnError,
    NonPrivateChargeError,
    RefusalError,
    ValidationFailedError,
)
from privsynth.report.dp_report import headline
from privsynth.report.uncertainty import NOT_MEASURED
from privsynth.run.parameters import RunParameters
from privsynth.run.phase import stop_message
from privsynth.run.prepare import prepare_run
from privsynth.run.stages import RunOutcome, execute
from tasks.audit import audit_task
from tasks.binarise import binarise_task
from tasks.discover import discover_task
from tasks.mechanism import mechanism_task
from tasks.report import report_task
from tasks.rounding import rounding_task
from tasks.validate import validate_task

TASKS = {"discover": discover_task, "validate": validate_task, "binarise": binarise_task, "mechanism": mechanism_task,
         "rounding": rounding_task, "report": report_task, "audit": audit_task}


class ExpectedRefusalsOnOneLine(logging.Filter):
    """An expected refusal (budget, validation, infeasible request, bad input) is the user's to fix and its
    message already names what is wrong. The flow's ``refused`` logs it once, as a WARNING; so Prefect's own
    records of it are not repeated: a task's exception record of a refusal is dropped (no traceback), and the
    "Finished in state Failed(...)" lines of a refused task or flow are INFO, not ERROR. Anything else (a
    bug) keeps its ERROR line and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, KNOWN_ERRORS):
            return False
        if record.levelno >= logging.ERROR and not record.exc_info:
            message = record.getMessage()
            if message.startswith("Finished in state Failed") and any(mark in message for mark in REFUSAL_MARKS):
                record.levelno, record.levelname = logging.INFO, "INFO"
        return True


_ONE_LINE = ExpectedRefusalsOnOneLine()
for _name in ("prefect.flow_runs", "prefect.task_runs"):
    logging.getLogger(_name).addFilter(_ONE_LINE)

REFUSAL_KINDS: dict[type[RefusalError], str] = {
    BudgetExceededError: "budget-exceeded", BudgetNotSetError: "budget-not-set", NonPrivateChargeError: "budget-not-dp",
    NoiseAlreadyDrawnError: "release-lost", ValidationFailedError: "validation-failed",
    InfeasibleRequestError: "infeasible-request"}


def refusal_kind(err: BaseException) -> str:
    """The event name of a refusal: its class's kind, or a parent's, else invalid input."""
    return next((kind for cls, kind in REFUSAL_KINDS.items() if isinstance(err, cls)), "invalid-input")


def _refusal_classes(root: type) -> list[type]:
    return [root, *(c for sub in root.__subclasses__() for c in _refusal_classes(sub))]


# What a refused task's or flow's final state message holds: the error's class, or the flow's "kind: ".
REFUSAL_MARKS = tuple(f"{cls.__name__}:" for root in KNOWN_ERRORS for cls in _refusal_classes(root)) + tuple(
    f"{kind}: " for kind in (*REFUSAL_KINDS.values(), "invalid-input"))


def prefect_runner(name, stage, *args):  # noqa: ARG001  (the stage function is the task's own)
    """Run a stage as its Prefect task (results stay in memory; nothing is persisted)."""
    return TASKS[name](*args)


def _run_id() -> str:
    """Stable across retries of one Prefect flow run, so a retry resumes the same folder and release."""
    started = flow_run.get_scheduled_start_time()
    stamp = started.strftime("%Y%m%d-%H%M%S") if started else time.strftime("%Y%m%d-%H%M%S")
    run = flow_run.get_id()
    return f"{stamp}-{str(run)[:6]}" if run else stamp


def _artifact_key(dataset: str, what: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes, one per dataset."""
    slug = "".join(ch if ch.isalnum() else "-" for ch in dataset.lower()).strip("-") or "dataset"
    return f"privsynth-{slug}-{what}"


def privacy_artifact_row(outcome: RunOutcome) -> dict:
    """The privacy artifact's row: the run's one figure (privacy.json's ``spent``) and its parts,
    as the console says."""
    total, cost = outcome.privacy.total_cost(), outcome.privacy.document["cost"]
    return {"mechanism": outcome.privacy.mechanism, "statement": outcome.privacy.spend_line(),
            "epsilon": outcome.privacy.epsilon(), "delta": total.get("delta"), "rho_zcdp": total.get("rho_zcdp"),
            "pure_epsilon": cost.get("pure_epsilon"), "synthetic_rows": outcome.rounding.rows,
            "reused_stored_release": outcome.reused}


def publish_artifacts(outcome: RunOutcome, dataset: str) -> None:
    """Public, DP-safe artifacts only: privacy spent, release size, output links, the DP report."""
    create_table_artifact(key=_artifact_key(dataset, "privacy"), table=[privacy_artifact_row(outcome)],
                          description="Privacy spent by this run, all stages together (public)")
    synthetic = (f"{outcome.run_dir}/synthetic.parquet" if "://" in outcome.run_dir
                 else Path(outcome.run_dir, "synthetic.parquet").resolve().as_uri())
    create_link_artifact(key=_artifact_key(dataset, "synthetic"), link=synthetic,
                         link_text=f"synthetic table ({outcome.rounding.rows} rows)",
                         description="The DP synthetic table")
    if outcome.rounding.sink:
        create_markdown_artifact(key=_artifact_key(dataset, "sink"),
                                 markdown=f"Written to `{outcome.rounding.sink}`",
                                 description="Where the synthetic table was also written")
    publish_report(outcome, dataset)


def _run_file(outcome: RunOutcome, name: str) -> str:
    """Where a run-folder file lives for a reader of the artifact: its URL on the run's storage, or a file URI."""
    return f"{outcome.run_dir}/{name}" if "://" in outcome.run_dir else Path(outcome.run_dir, name).resolve().as_uri()


def report_markdown(report: dict, html_link: str) -> str:
    """The report artifact: the headline figures and a link to report.html (pictures embedded there).

    Built from the DP report alone (public); the internal audit is never read here.
    """
    acc = report.get("accuracy") or {}
    lines = ["# privsynth DP report", "", *headline(report), "",
             f"**[Open report.html]({html_link})**: per-column pictures with the DP measurement's error bars, the "
             "pairs heatmap coloured by the 95% bound, the budget per stage (one self-contained file).", "",
             f"{acc.get('applies', '')}. Each bound: {acc.get('coverage', '')}.", "",
             "| column | 95% TV bound |", "|---|---|"]
    lines += [f"| {c['column']} | " + (f"{c['tv_bound']:.3f}" if c["status"] == "bound" else NOT_MEASURED) + " |"
              for c in report.get("columns", [])]
    return "\n".join(lines) + "\n"


def publish_report(outcome: RunOutcome, dataset: str) -> None:
    """The DP report's artifacts (public): the headline and every column's bound (markdown), and report.html's link."""
    report = outcome.report.to_json()
    html_link = _run_file(outcome, "report.html")
    create_markdown_artifact(key=_artifact_key(dataset, "report"), markdown=report_markdown(report, html_link),
                             description="DP report: which columns and pairs can be trusted, and how far off (public)")
    create_link_artifact(key=_artifact_key(dataset, "report-html"), link=html_link,
                         link_text="report.html (pictures, offline)", description="The DP report with its pictures")


def publish_synthetic_validation(outcome: RunOutcome, dataset: str) -> None:
    """The synthetic table's Great Expectations validation against its schema's suite, one row per
    expectation (public: it is about synthetic rows; the counts are of the synthetic table)."""
    import json

    doc = json.loads(Path(outcome.local_dir, "synthetic-validation.json").read_text())
    rows = [{k: r.get(k) for k in ("expectation_type", "column", "success", "unexpected_count", "unexpected_percent",
                                   "message")} for r in doc.get("results", [])]
    create_table_artifact(key=_artifact_key(dataset, "synthetic-validation"),
                          table=rows or [{"error": doc.get("error")}],
                          description=("Great Expectations: the synthetic table against its schema's suite: "
                                       + ("passed" if doc.get("success") else "FAILED (a bug of the pipeline)")))


def dataset_concurrency_limit(dataset: str) -> str:
    """A Prefect global concurrency limit of 1 per dataset (created when missing), so two runs on one
    dataset queue instead of racing to the ledger. The ledger stays the authority either way."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    name = _artifact_key(dataset, "runs")
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            except ObjectAlreadyExists:
                pass
    return name


SLOT_WAIT_ENV = "PRIVSYNTH_SLOT_WAIT_S"  # how long a run queues behind another run of its dataset (default 600 s)


def run_with_dataset_slot(ctx, dataset: str):
    """Run while holding the dataset's slot, so runs on one dataset queue. The slot is a courtesy, the
    ledger is the authority: a slot still held by a killed run (until its lease lapses) makes a resumed
    run wait at most $PRIVSYNTH_SLOT_WAIT_S (600 s by default), then it goes ahead without the slot, and says so."""
    if os.environ.get(CLI_ENV) == "1" and not os.environ.get("PREFECT_API_URL"):
        # A CLI run on Prefect's temporary server: no shared server to queue on, and a slot left by a
        # stopped run would outlive it there. The ledger serialises the charge.
        return execute(ctx, prefect_runner)
    wait_s = float(os.environ.get(SLOT_WAIT_ENV, "600"))
    with ExitStack() as stack:
        try:  # prefect's AcquireConcurrencySlotTimeoutError is a TimeoutError; only the acquisition is guarded
            stack.enter_context(concurrency(dataset_concurrency_limit(dataset), occupy=1, timeout_seconds=wait_s,
                                            lease_duration=60))
        except TimeoutError:
            get_run_logger().warning("the dataset's run slot stayed taken for %.0f s (a killed run holds it until its "
                                     "lease lapses); going ahead: the ledger still serialises the charge", wait_s)
        return execute(ctx, prefect_runner)


CLI_ENV = "PRIVSYNTH_CLI_RUN"


def _child_processes() -> list[int]:
    """Process ids whose parent is this process (Linux /proc; empty elsewhere)."""
    me, children = os.getpid(), []
    for entry in Path("/proc").glob("[0-9]*/stat") if Path("/proc").is_dir() else ():
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            children.append(int(entry.parent.name))
    return children


def stop_at_once_on_sigterm() -> None:
    """In a `privsynth run` process only: SIGTERM ends the process at once (status 143).

    Prefect's own handler raises an exception wherever the signal lands, also inside compiled code (a
    JAX or DuckDB call), which aborts the process with a C++ traceback. A stop at any point is safe here:
    every artifact is written atomically and the ledger's charge and noise claim are transactions, so
    it is exactly a kill. Worker and served runs keep Prefect's handler (it reports cancellations).
    """
    if os.environ.get(CLI_ENV) != "1":
        return

    def stop(signum, frame):  # noqa: ARG001
        os.write(2, (stop_message() + "\n").encode())
        for child in _child_processes():  # Prefect's temporary API server, if this run started one
            try:
                os.kill(child, signal.SIGTERM)
            except OSError:
                pass
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)


CREDENTIAL_VARIABLES = ("PRIVSYNTH_DB_PASSWORD", "PGPASSWORD")


def load_credentials(block_name: str) -> None:
    """Read the password from a Prefect Secret block into this run's environment (the worker's process):
    the form and the stored parameters hold only the block's name."""
    from prefect.blocks.system import Secret

    from privsynth.io.credentials import CredentialError

    try:
        value = Secret.load(block_name).get()
    except ValueError:
        raise CredentialError(f"credentials_block: no Prefect Secret block named {block_name!r}") from None
    for name in CREDENTIAL_VARIABLES:
        os.environ[name] = str(value)


def refused(err: BaseException, dataset: str | None):
    """An expected refusal: one log line, an event an automation can react to, a Failed state that says why."""
    kind = refusal_kind(err)
    get_run_logger().warning("refused (%s): %s", kind, err)
    emit_event(event=f"privsynth.run.refused.{kind}",
               resource={"prefect.resource.id": f"privsynth.dataset.{dataset or 'unknown'}"},
               payload={"reason": kind, "message": str(err)})
    return Failed(message=f"{kind}: {err}", data=err)


@flow(name="privsynth-synthesize", log_prints=False, validate_parameters=True)
def synthesize(parameters: RunParameters = RunParameters(), release_store: str | None = None):
    """Release a DP synthetic table. Returns public facts only: folder, outputs, privacy spent."""
    logger = get_run_logger()
    dataset = None
    stop_at_once_on_sigterm()
    try:
        if parameters.credentials_block:
            load_credentials(parameters.credentials_block)
        ctx = prepare_run(parameters, run_id=_run_id(), release_store=release_store,
                          progress=lambda line: logger.info("%s", line))
        dataset = ctx.plan.dataset
        logger.info("run %s: %s on %s at epsilon %g -> %s", ctx.run_id, parameters.mechanism,
                    ctx.folder.manifest["input"]["source"], parameters.epsilon, ctx.folder.path)
        # The mechanism's own progress lines (its rounds, time left: public facts only) go to the run's logs in
        # any process, a worker's included, without relying on PREFECT_LOGGING_EXTRA_LOGGERS there.
        with forwarded_progress(lambda line: logger.info("%s", line)):
            outcome = run_with_dataset_slot(ctx, dataset)
    except KNOWN_ERRORS as err:
        return refused(err, dataset or parameters.dataset)
    publish_artifacts(outcome, dataset)
    publish_synthetic_validation(outcome, dataset)
    ctx.folder.release_local_copy()
    return outcome.public_summary()
