"""Everything before the data is touched: the checked plan, the budget pre-check, the run folder,
the ledger and the release store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.seeds import check_seed_with_budget, has_budget  # noqa: F401  (has_budget: re-exported)
from privsynth.run import phase
from privsynth.run.context import RunContext, logger
from privsynth.run.runfolder import RunFolder, new_run_id
from privsynth.schema import Schema
from privsynth.schema.encoding import domain_of


def resumed_release_key(location: str, run_key: dict) -> str | None:
    """The release key an earlier attempt of the same run recorded in its manifest, if any."""
    from privsynth.io.storage import RemoteFolder, is_remote

    try:
        if is_remote(location):
            remote = RemoteFolder(location)
            previous = json.loads(remote.read_bytes("manifest.json")) if remote.exists("manifest.json") else None
        else:
            path = Path(location) / "manifest.json"
            previous = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None
    if not previous or previous.get("run_key") != json.loads(json.dumps(run_key, default=str)):
        return None
    return previous.get("facts", {}).get("release_key")


def public_path(text: str) -> str:
    """A path as the manifest shows it: the bundled example by name, a path under the working folder relative
    to it, anything else as the user gave it (a manifest travels; this machine's folder layout need not)."""
    from privsynth.run.parameters import bundled_example

    prefix, colon, rest = text.partition(":") if text.startswith(("csv:", "parquet:")) else ("", "", text)
    path = Path(rest)
    package_data = Path(bundled_example()[0]).parent
    if path.is_absolute():
        if path.parent == package_data:
            rest = f"<bundled example>/{path.name}"
        else:
            try:
                rest = str(path.relative_to(Path.cwd()))
            except ValueError:
                pass
    return f"{prefix}{colon}{rest}"


def prepare_run(parameters, *, data: Any = None, schema: Schema | None = None, run_id: str | None = None,
                release_store: str | Path | None = None, progress: Callable[[str], None] | None = None) -> RunContext:
    """Everything before the data is touched: checked plan, budget pre-check, run folder, ledger, store.

    ``data`` is an in-memory table (the Python API) or None (the plan's ``input`` URL, or the bundled
    example). Raises the typed errors of ``privsynth.errors`` on the first problem; nothing is read,
    written or charged then (except the run folder's creation).
    """
    from privsynth.privacy.ledger import BudgetLedger
    from privsynth.run.plan import plan_run
    from privsynth.run.releases import ReleaseStore

    plan = plan_run(parameters, schema=schema, in_memory=data is not None)
    say = progress or (lambda line: logger.info("%s", line))
    ledger = BudgetLedger(parameters.ledger)
    run_id = run_id or new_run_id()
    location = parameters.output or str(Path("runs") / run_id)
    run_key = parameters.model_dump(mode="json", exclude={"output"})
    if parameters.public_rows is not None and plan.schema is not None:  # a stated, public n: the forecast is free
        from privsynth.report.forecast import forecast, format_forecast

        say(format_forecast(forecast(plan.mechanism.NAME, plan.cost, parameters.epsilon, parameters.delta,
                                     domain_of(plan.schema), parameters.public_rows, plan.mechanism.caps_rows)))
    say(precheck_budget(ledger, plan.dataset, plan.cost, unlimited=plan.unlimited,
                        public_example=plan.bundled_example and not parameters.unlimited,
                        seeded=parameters.seed is not None, allow_seed_with_budget=parameters.allow_seed_with_budget,
                        resumed_key=resumed_release_key(location, run_key)))
    folder = RunFolder.open_at(location, run_key, run_id)
    phase.enter("before_charge", run_dir=folder.location)
    run_id = folder.manifest["run_id"]
    folder.manifest.update(parameters=parameters.public_json(), dataset=plan.dataset,
                           schema={"name": plan.schema.name, "path": public_path(plan.schema_path),
                                   "sha256": plan.schema.content_hash()} if plan.schema is not None else
                           {"discovered": "schema.yaml (this run's discover stage, DP)"},
                           input={"source": public_path(plan.source.describe()) if plan.source is not None else
                                  "in-memory table (Python API)"})
    folder.save()
    if data is None:
        from privsynth.run.parameters import bundled_example

        data = parameters.input or bundled_example()[0]
    return RunContext(plan, data, folder, ledger, ReleaseStore(release_store), run_id=run_id,
                      keep_private=parameters.keep_private, progress=say)


def precheck_budget(ledger, dataset: str, cost: PrivacyCost, *, unlimited: bool, seeded: bool,
                    allow_seed_with_budget: bool, resumed_key: str | None = None,
                    public_example: bool = False) -> str:
    """Refuse a run the dataset's budget cannot cover, before any data is read; returns a log line.

    * A dataset without a budget is refused unless the spend without limit is explicit (``unlimited``), or
      the input is the bundled example (``public_example``: public data, said as such).
    * A seed on a dataset with a budget is refused unless ``allow_seed_with_budget``: seeded noise is a
      testing feature (reproducible numpy streams, not hardened against floating-point attacks).
    * A resumed run whose release key is already charged is not counted twice.
    The binding check stays the ledger's transactional charge in the mechanism stage.
    """
    from privsynth.privacy.ledger import (
        BudgetExceededError,
        BudgetNotSetError,
        NonPrivateChargeError,
        UnknownDatasetError,
    )
    from privsynth.privacy.spending import WHY_EPSILONS_DO_NOT_SUBTRACT, fits_budget

    try:
        status = ledger.status(dataset)[0]
    except UnknownDatasetError:
        status = None
    if status is None or status.epsilon is None:
        if not unlimited:
            raise BudgetNotSetError(
                f"dataset {dataset!r} has no privacy budget; set one with `privsynth budget set {dataset} --epsilon E` "
                "or spend without a limit explicitly with --unlimited (nothing was read or charged)")
        if public_example:
            return (f"dataset {dataset!r} is the bundled example, public data (UCI Adult): it needs no budget; "
                    "the spend is recorded in the ledger (`privsynth budget show`)")
        return f"dataset {dataset!r} has no budget: spending WITHOUT A LIMIT (explicitly allowed by --unlimited)"
    check_seed_with_budget(dataset, budgeted=True, seeded=seeded, allowed=allow_seed_with_budget)
    if resumed_key is not None and ledger.find_charge(dataset, resumed_key) is not None:
        return f"dataset {dataset!r}: this run's release is already charged; resuming without a new charge"
    if not cost.is_dp:
        raise NonPrivateChargeError(f"dataset {dataset!r} has a privacy budget; a release with no DP guarantee "
                                    "cannot be charged to it")
    needed = cost.pure_epsilon if status.delta is None else cost.epsilon_at(status.delta)
    if needed is None:  # a pure-DP budget and a zCDP cost
        raise BudgetExceededError(
            f"dataset {dataset!r} has a pure-DP budget (no delta) and this mechanism is zCDP; set the budget with a "
            f"delta (`privsynth budget set {dataset} --epsilon E`, delta defaults to 1e-9) or use a pure-DP mechanism "
            "(nothing was read or charged)")
    costs = [record.cost() for record in ledger.history(dataset)] + [cost]
    if not fits_budget(costs, status.epsilon, status.delta):
        raise BudgetExceededError(
            f"dataset {dataset!r}: this run needs epsilon {needed:.4g} but one more run may spend at most epsilon "
            f"{status.next_run_epsilon:.4g} (budget {status.epsilon:g}, spent {status.spent_epsilon:.4g}; "
            f"{WHY_EPSILONS_DO_NOT_SUBTRACT}); nothing was read or charged")
    return budget_line(dataset, status, costs, needed)


def budget_line(dataset: str, status, costs, needed: float) -> str:
    """The pre-check's line: what was spent, and what one more run may spend after this one (not a subtraction)."""
    from privsynth.privacy.spending import next_run_epsilon

    after = next_run_epsilon(costs, status.epsilon, status.delta)
    return (f"dataset {dataset!r}: spent epsilon {status.spent_epsilon:.4g} of {status.epsilon:g}; this run spends "
            f"epsilon {needed:.4g}, after which one more run may spend at most epsilon {after:.4g} (epsilons do not "
            "subtract: `privsynth budget show` explains)")
