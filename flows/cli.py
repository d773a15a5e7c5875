"""The ``privsynth`` command.

    privsynth run [--input PATH_OR_URL] [--schema schemas/x.yaml] [--mechanism NAME]
                  [--epsilon 1.0] [--delta 1e-9] [--rows N] [--seed S] [--output DIR]
                  [--sink duckdb:PATH?table=NAME] [--dataset NAME] [--ledger URL]
                  [--option KEY=VALUE ...] [--audit-target COLUMN]
    privsynth feasibility --schema schemas/x.yaml --rows-available N --epsilon E [--rows K] [--degree D]
    privsynth budget set DATASET --epsilon E [--delta D] [--ledger URL]
    privsynth budget show [DATASET] [--ledger URL]
    privsynth mechanisms

Errors in the input or parameters exit with status 2 and one line that names what is wrong.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with the contract's error form: exit 2 and one line (no usage block)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"privsynth: error: {message} (see '{self.prog} --help')\n")


class _KnownErrorsOnOneLine(logging.Filter):
    """Drop the traceback from Prefect's log records of a known input/parameter error.

    Such an error is the user's to fix, and its message already names the file, column or
    parameter; the traceback only buries it. Unexpected errors keep their tracebacks.
    """

    def __init__(self, known: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.known = known

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, self.known):
            record.exc_info = None
            record.exc_text = None
        return True


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            from privsynth.config import ParameterError

            raise ParameterError(f"--option expects KEY=VALUE, got {pair!r}")
        options[key.strip()] = _option_value(value)
    return options


def build_parser() -> argparse.ArgumentParser:
    from privsynth.config import DEFAULT_MECHANISM
    from privsynth.mechanisms import MECHANISM_MODULES

    parser = _Parser(prog="privsynth", description="Differentially private synthetic tables.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="release a DP synthetic table (default: the bundled Adult example)")
    run.add_argument("--input", help="CSV/Parquet path or URL, duckdb:PATH?table=NAME, or SQLAlchemy URL?table=NAME")
    run.add_argument("--schema", dest="schema_file", help="YAML schema (public metadata); required with --input")
    run.add_argument("--mechanism", default=DEFAULT_MECHANISM, help=f"one of {', '.join(sorted(MECHANISM_MODULES))}")
    run.add_argument("--epsilon", type=float, default=1.0)
    run.add_argument("--delta", type=float, default=1e-9)
    run.add_argument("--rows", type=int, help="synthetic rows (default: the release's DP estimate of n)")
    run.add_argument("--seed", type=int, help="reproducible noise (not hardened); omit for OpenDP's secure samplers")
    run.add_argument("--output", help="run folder (default runs/<run-id>/)")
    run.add_argument("--sink", help="also write the synthetic table to duckdb:PATH?table=NAME or a .parquet/.csv path")
    run.add_argument("--dataset", help="dataset name in the budget ledger (default: the schema's name)")
    run.add_argument("--ledger", help="budget ledger URL (default $PRIVSYNTH_LEDGER_URL or runs/ledger.sqlite)")
    run.add_argument("--option", action="append", metavar="KEY=VALUE", help="mechanism setting (repeatable)")
    run.add_argument("--audit-target", help="column for the train-on-synthetic / test-on-real score")

    feas = sub.add_parser("feasibility", help="what private sampling's guarantee allows for a table")
    feas.add_argument("--schema", dest="schema_file", required=True)
    feas.add_argument("--rows-available", type=int, required=True, help="n, the (public) number of input rows")
    feas.add_argument("--epsilon", type=float, required=True)
    feas.add_argument("--rows", type=int, help="synthetic rows wanted (k)")
    feas.add_argument("--degree", type=int, default=2, help="marginal degree d")
    feas.add_argument("--json", action="store_true", help="print the report as JSON")

    budget = sub.add_parser("budget", help="the privacy budget ledger")
    budget_sub = budget.add_subparsers(dest="budget_command", required=True)
    bset = budget_sub.add_parser("set", help="set a dataset's total budget")
    bset.add_argument("dataset")
    bset.add_argument("--epsilon", type=float, required=True)
    bset.add_argument("--delta", type=float)
    bset.add_argument("--ledger")
    bshow = budget_sub.add_parser("show", help="spent and remaining budget")
    bshow.add_argument("dataset", nargs="?")
    bshow.add_argument("--ledger")

    sub.add_parser("mechanisms", help="list the mechanisms and their guarantees")
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    from pydantic import ValidationError

    from privsynth.config import ParameterError
    from privsynth.io import InputError
    from privsynth.mechanisms import UnknownMechanismError
    from privsynth.pipeline import ValidationFailedError
    from privsynth.runfolder import RunFolderError
    from privsynth.schema import SchemaError

    errors: list[type[BaseException]] = [ParameterError, InputError, SchemaError, ValidationFailedError,
                                         RunFolderError, UnknownMechanismError, ValidationError]
    try:
        from privsynth.privacy.ledger import BudgetExceededError, LedgerError

        errors += [BudgetExceededError, LedgerError]
    except ImportError:
        pass
    try:
        from privsynth.mechanisms.private_sampling import InfeasibleRequestError

        errors.append(InfeasibleRequestError)
    except ImportError:
        pass
    return tuple(errors)


def _print_run_summary(result: dict) -> None:
    cost = result["privacy"]
    guarantee = (f"pure epsilon {cost['pure_epsilon']:g}" if cost.get("pure_epsilon") is not None
                 else f"rho {cost['rho_zcdp']:.4g}-zCDP") if cost.get("differentially_private") else "NOT differentially private"
    print("")
    print(f"privsynth run {result['run_id']} finished")
    print(f"  synthetic table : {result['synthetic']} ({result['rows']} rows)")
    if result.get("sink"):
        print(f"  sink            : {result['sink']}")
    print(f"  privacy         : {guarantee}" + (f"; (epsilon {cost['epsilon_at_delta']:.4g}, delta {cost['delta']:g})"
                                              if cost.get("differentially_private") else ""))
    if result.get("reused_release"):
        print("  release         : reused the stored release of this run; nothing charged")
    print(f"  {result['audit_headline']}")
    print(f"  reports         : {result['run_dir']}/audit.md, privacy.json, manifest.json")


def command_run(args: argparse.Namespace) -> int:
    from privsynth.config import parse_parameters, plan_run

    values = {k: v for k, v in {
        "input": args.input, "schema_file": args.schema_file, "mechanism": args.mechanism, "epsilon": args.epsilon,
        "delta": args.delta, "rows": args.rows, "seed": args.seed, "output": args.output, "sink": args.sink,
        "dataset": args.dataset, "ledger": args.ledger, "mechanism_options": _parse_options(args.option),
        "audit_target": args.audit_target}.items() if v is not None}
    parameters = parse_parameters(values)
    plan_run(parameters)  # every parameter checked here, before Prefect starts or any data is read
    from flows.synthesize import synthesize

    one_line = _KnownErrorsOnOneLine(_known_errors())
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).addFilter(one_line)
    result = synthesize(parameters)
    _print_run_summary(result)
    return 0


def command_feasibility(args: argparse.Namespace) -> int:
    from privsynth.mechanisms.private_sampling.feasibility import feasibility_for_schema, format_feasibility
    from privsynth.schema import load_schema

    report = feasibility_for_schema(load_schema(args.schema_file), args.rows_available, args.epsilon, k=args.rows, d=args.degree)
    print(json.dumps(report, indent=2) if args.json else format_feasibility(report))
    return 0


def command_budget(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from privsynth.config import ParameterError, check_ledger_url
    from privsynth.privacy.ledger import BudgetLedger, LedgerError, format_status

    if args.ledger is not None:
        check_ledger_url(args.ledger)
    try:
        ledger = BudgetLedger(args.ledger)
        if args.budget_command == "set":
            ledger.set_budget(args.dataset, args.epsilon, args.delta)
        print(format_status(ledger.status(args.dataset)))
    except LedgerError:
        raise
    except ValueError as err:  # the ledger's argument checks (epsilon > 0, 0 < delta < 1, names)
        raise ParameterError(f"budget {args.budget_command}: {err}") from None
    except sa.exc.SQLAlchemyError as err:
        raise ParameterError(f"budget ledger cannot be used ({type(err).__name__}); check --ledger or "
                             "$PRIVSYNTH_LEDGER_URL") from None
    return 0


def command_mechanisms(_: argparse.Namespace) -> int:
    from privsynth.mechanisms import MECHANISM_MODULES, get_mechanism

    for name in sorted(MECHANISM_MODULES):
        module = get_mechanism(name)
        summary = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        print(f"{name:18s} {summary}")
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    # Without a Prefect server, runs use Prefect's ephemeral API; on a busy 2-core machine it can take
    # longer to start than Prefect's 20 s default.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    args = build_parser().parse_args(argv)
    handlers = {"run": command_run, "feasibility": command_feasibility, "budget": command_budget,
                "mechanisms": command_mechanisms}
    try:
        return handlers[args.command](args)
    except _known_errors() as err:
        print(f"privsynth: error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
