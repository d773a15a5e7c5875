"""The ``privsynth`` command.

    privsynth run [--input PATH_OR_URL] [--schema schemas/x.yaml] [--mechanism NAME]
                  [--epsilon 1.0] [--delta 1e-9] [--rows N] [--seed S] [--output DIR]
                  [--sink duckdb:PATH?table=NAME] [--dataset NAME] [--ledger URL] [--unlimited]
                  [--public-rows N] [--option KEY=VALUE ...]
                  [--audit [--audit-target COLUMN] [--audit-location PRIVATE_PATH_OR_URL]]
    privsynth feasibility --schema schemas/x.yaml --rows-available N --epsilon E [--rows K] [--degree D]
    privsynth budget set DATASET --epsilon E [--delta D | --pure] [--ledger URL]
    privsynth budget show [DATASET] [--ledger URL]
    privsynth schema draft --input SOURCE --output schema.yaml [--name NAME] [--epsilon E [--dataset D]
                  [--ledger URL] [--bounds COL=LOW:HIGH ...] [--bins K] [--public-rows N] [--unlimited]] [--force]
                  [--peek-without-dp]
                  [--public SOURCE ... [--public-model NAME]]
    privsynth schema expectations --schema schema.yaml [--output suite.json] [--format gx|dbt]
    privsynth mechanisms

Errors in the input or parameters exit with status 2 and one line that names what is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from privsynth.cli.in_process import IN_PROCESS_LINE, prefect_api_url, run_in_process  # noqa: F401
from privsynth.cli.stop import _STOP, _sigterm_stops_this_command, _stop_on_sigterm, _stopped_line  # noqa: F401

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with the contract's error form: exit 2 and one line (no usage block)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"privsynth: error: {message} (see '{self.prog} --help')\n")


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
            from privsynth.run.parameters import ParameterError

            raise ParameterError(f"--option expects KEY=VALUE, got {pair!r}")
        options[key.strip()] = _option_value(value)
    return options


def add_public_options(parser: argparse.ArgumentParser, public_help: str) -> None:
    """--public, --public-model and --trust-data-derived-contracts: the same for `run` and `schema draft`."""
    parser.add_argument("--public", action="append", metavar="SOURCE", help=public_help)
    parser.add_argument("--public-model", help="the dbt model to read when a schema.yml holds several")
    parser.add_argument("--trust-data-derived-contracts", action="store_true", help="read as public the --public "
                        "facts that may have been computed from the rows (a profiled GX suite, ENUM labels, CHECK "
                        "values): marked DATA-DERIVED, not covered by the DP guarantee; without it they are refused")


def build_parser() -> argparse.ArgumentParser:
    from privsynth.mechanisms import DEFAULT_MECHANISM, MECHANISM_MODULES

    parser = _Parser(prog="privsynth", description="Differentially private synthetic tables.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="release a DP synthetic table (default: the bundled Adult example)")
    run.add_argument("--input", help="CSV/Parquet path or URL, duckdb:PATH?table=NAME, SQLAlchemy URL?table=NAME, "
                     "spark:TABLE, or spark:parquet:PATH (csv, orc, json: files the Spark cluster reads)")
    run.add_argument("--schema", dest="schema_file", help="YAML schema (public metadata); without it an --input's "
                     "schema is discovered under DP inside the run's budget")
    run.add_argument("--mechanism", default=DEFAULT_MECHANISM, help=f"one of {', '.join(sorted(MECHANISM_MODULES))}")
    run.add_argument("--epsilon", type=float, default=1.0)
    run.add_argument("--delta", type=float, default=1e-9)
    run.add_argument("--rows", type=int, help="synthetic rows (default: the release's DP estimate of n)")
    run.add_argument("--seed", type=int, help="TESTING ONLY: reproducible numpy noise derived from the seed and the "
                     "release, NOT hardened against floating-point attacks; refused on a dataset with a budget unless "
                     "--allow-seed-with-budget. Omit it for releases (OpenDP's samplers)")
    run.add_argument("--allow-seed-with-budget", action="store_true",
                     help="accept --seed on a dataset that has a privacy budget")
    run.add_argument("--output", help="run folder (default runs/<run-id>/)")
    run.add_argument("--sink", help="also write the synthetic table to duckdb:PATH?table=NAME or a .parquet/.csv path")
    run.add_argument("--dataset", help="dataset name in the budget ledger, the one this run charges (default: the "
                     "schema's name; without --schema, the input's file or table name: --input data/people.csv "
                     "charges dataset people)")
    run.add_argument("--ledger", help="budget ledger URL (default $PRIVSYNTH_LEDGER_URL or the per-user ledger in "
                     "$PRIVSYNTH_HOME, see `privsynth budget show`)")
    run.add_argument("--credentials-block", help="name of a Prefect Secret block holding the database password "
                     "(read into PRIVSYNTH_DB_PASSWORD and PGPASSWORD when the run starts)")
    run.add_argument("--unlimited", action="store_true",
                     help="spend without a limit on a dataset that has no budget (explicit and logged)")
    run.add_argument("--refuse-invalid-records", action="store_true", help="refuse the run when a record fails the "
                     "schema's expectations instead of dropping it (the default, with or without a budget); such a "
                     "run's outcome is NOT covered by the DP guarantee, and it says so")
    run.add_argument("--public-rows", type=int, help="the table's row count, if it is public knowledge (private "
                     "sampling's guarantee needs it); never read from the data")
    run.add_argument("--option", action="append", metavar="KEY=VALUE", help="mechanism setting (repeatable)")
    run.add_argument("--fine-decoding", type=float, metavar="SHARE", help="share of the budget for DP sub-bin counts "
                     "of numeric and temporal columns, so values follow the data inside a bin (default 0.05; 0.2 where "
                     "discovery placed the bins; 0: uniform inside the bin); the total charged is unchanged")
    run.add_argument("--audit", action="store_true", help="also write the INTERNAL (not DP) audit against the real "
                     "data to DIR/internal-audit/ (never sent to Prefect)")
    run.add_argument("--audit-target", help="with --audit: column for the train-on-synthetic / test-on-real score")
    run.add_argument("--audit-location", help="with --audit: a PRIVATE folder (path or fsspec URL) for the internal "
                     "audit instead of DIR/internal-audit/; required with a remote --output (never uploaded there)")
    add_public_options(run, "without --schema: a data contract whose facts are PUBLIC (dbt schema.yml, GX suite, "
                       "Frictionless schema, db:); repeatable")
    run.add_argument("--discovery-share", type=float, metavar="SHARE", help="without --schema: the share of the "
                     "budget spent discovering the table's domain (default: by need, 3%% per column, at least 20%%, "
                     "at most 35%%)")
    run.add_argument("--keep-private", action="store_true", help="DEBUG: keep the private intermediates")

    feas = sub.add_parser("feasibility", help="what private sampling's guarantee allows for a table")
    feas.add_argument("--schema", dest="schema_file", required=True)
    feas.add_argument("--rows-available", type=int, required=True, help="n, the (public) number of input rows")
    feas.add_argument("--epsilon", type=float, required=True)
    feas.add_argument("--rows", type=int, help="synthetic rows wanted (k)")
    feas.add_argument("--degree", type=int, default=2, help="marginal degree d")
    feas.add_argument("--json", action="store_true", help="print the report as JSON")

    fc = sub.add_parser("forecast", help="the noise a run would carry, before anything is read or charged")
    fc.add_argument("--schema", dest="schema_file", help="YAML schema (default: the bundled Adult schema)")
    fc.add_argument("--public-rows", type=int, required=True,
                    help="about how many rows the table has (public knowledge)")
    fc.add_argument("--mechanism", default=DEFAULT_MECHANISM, help=f"one of {', '.join(sorted(MECHANISM_MODULES))}")
    fc.add_argument("--epsilon", type=float, default=1.0)
    fc.add_argument("--delta", type=float, default=1e-9)
    fc.add_argument("--option", action="append", metavar="KEY=VALUE", help="mechanism setting (repeatable)")
    fc.add_argument("--json", action="store_true", help="print the forecast as JSON")

    budget = sub.add_parser("budget", help="the privacy budget ledger")
    budget_sub = budget.add_subparsers(dest="budget_command", required=True)
    bset = budget_sub.add_parser("set", help="set a dataset's total budget")
    bset.add_argument("dataset")
    bset.add_argument("--epsilon", type=float, required=True)
    kind = bset.add_mutually_exclusive_group()
    kind.add_argument("--delta", type=float, help="delta of the budget (default 1e-9, the delta runs use)")
    kind.add_argument("--pure", action="store_true", help="a pure-DP budget (no delta): only pure-DP mechanisms fit")
    bset.add_argument("--ledger")
    bshow = budget_sub.add_parser("show", help="spent and remaining budget")
    bshow.add_argument("dataset", nargs="?")
    bshow.add_argument("--next-run", type=float, metavar="E", help="with DATASET: whether a run at epsilon E fits, "
                       "and the largest epsilon one more run may spend after it")
    bshow.add_argument("--ledger")

    schema = sub.add_parser("schema", help="schema files")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    draft = schema_sub.add_parser("draft", help="draft a schema from the source's declared types (a file to edit)")
    draft.add_argument("--input", required=True, help="Parquet/CSV path, duckdb:PATH?table=NAME, or SQL URL?table=NAME")
    draft.add_argument("--output", required=True, help="the draft YAML file to write")
    draft.add_argument("--name", help="schema name (default: the input's file or table name)")
    draft.add_argument("--epsilon", type=float, help="spend this much (charged to --dataset) on DP categories and "
                       "bin edges; without it no value is read")
    draft.add_argument("--dataset", help="dataset name in the budget ledger (default: the schema name)")
    draft.add_argument("--ledger", help="budget ledger URL (default as for `privsynth run`)")
    draft.add_argument("--bounds", action="append", metavar="COL=LOW:HIGH", help="PUBLIC bounds of a numeric column "
                       "(repeatable; dates and timestamps as ISO, COL=2013-01-01..2014-01-01): never read, and with "
                       "--epsilon its bin edges become DP")
    draft.add_argument("--categories", action="append", metavar="COL=a,b,c", help="PUBLIC categories of a column "
                       "(repeatable): never read from the data")
    add_public_options(draft, "a data contract whose facts are PUBLIC (dbt schema.yml or project, GX suite, "
                       "Frictionless schema, db:): never read, never charged")
    draft.add_argument("--bins", type=int, default=None,
                       help="bins per numeric column with --epsilon (default: 8 at epsilon 1 up to 10,000 values, "
                            "growing as sqrt(values) and epsilon's rho^(1/4), at most 16)")
    draft.add_argument("--public-rows", type=int, help="the table's row count, if it is public knowledge (never read "
                       "from the data): a draft whose --epsilon could find no category is refused before the charge")
    draft.add_argument("--unlimited", action="store_true", help="charge a dataset that has no budget (explicit)")
    draft.add_argument("--force", action="store_true", help="overwrite --output")
    draft.add_argument("--peek-without-dp", action="store_true", help="NOT DP: fill categories and bins from the "
                       "exact values (a file that leaks the data, labelled so); excludes --epsilon")

    expect = schema_sub.add_parser("expectations", help="the schema's checks as a Great Expectations suite (JSON)")
    expect.add_argument("--schema", dest="schema_file", required=True, help="YAML schema")
    expect.add_argument("--output", help="the file to write (default: standard output)")
    expect.add_argument("--format", choices=("gx", "dbt"), default="gx", help="gx: a GX suite (JSON, the default); "
                        "dbt: a dbt schema.yml with the same checks, for the model named as the schema")
    sub.add_parser("mechanisms", help="list the mechanisms and their guarantees")
    return parser


def _known_errors() -> tuple[type[BaseException], ...]:
    from pydantic import ValidationError

    from privsynth.errors import KNOWN_ERRORS

    return (*KNOWN_ERRORS, ValidationError)


def _print_run_summary(result: dict) -> None:
    print("")
    print(f"privsynth run {result['run_id']} finished")
    print(f"  synthetic table : {result['synthetic']} ({result['rows']} rows)")
    if result.get("sink"):
        print(f"  sink            : {result['sink']}")
    print(f"  privacy spent   : {result['epsilon_statement']}")
    if result.get("caveat"):
        print(f"  NOT COVERED     : {result['caveat']}")
    if result.get("reused_release"):
        print("  release         : reused the stored release of this run; nothing charged")
    report = result.get("report")
    if report:
        print(f"  DP report       : mean TV {report['mean_tv_to_measurements']:.4f} to the {report['measurements']} "
              f"noisy measurements (noise alone: about {report['mean_expected_tv_from_noise_alone']:.4f})")
    print(f"  reports         : {result['run_dir']}/report.html (report.md, report.json), privacy.json, manifest.json")
    if result.get("internal_audit"):
        print(f"  INTERNAL audit  : {result['internal_audit']}/audit.md (not DP: compares with the real data)")
    if result.get("prefect"):
        print(f"  Prefect         : {result['prefect']}")


def command_run(args: argparse.Namespace) -> int:
    from privsynth.run.parameters import parse_parameters
    from privsynth.run.plan import plan_run

    values = {k: v for k, v in {
        "input": args.input, "schema_file": args.schema_file, "mechanism": args.mechanism, "epsilon": args.epsilon,
        "delta": args.delta, "rows": args.rows, "seed": args.seed, "output": args.output, "sink": args.sink,
        "dataset": args.dataset, "ledger": args.ledger, "mechanism_options": _parse_options(args.option),
        "unlimited": args.unlimited or None, "refuse_invalid_records": args.refuse_invalid_records or None,
        "public_rows": args.public_rows, "credentials_block": args.credentials_block,
        "allow_seed_with_budget": args.allow_seed_with_budget or None, "audit": args.audit or None,
        "keep_private": args.keep_private or None, "audit_target": args.audit_target,
        "audit_location": args.audit_location,
        "fine_decoding": args.fine_decoding, "public": args.public, "public_model": args.public_model,
        "trust_data_derived": args.trust_data_derived_contracts or None,
        "discovery_share": args.discovery_share}.items() if v is not None}
    parameters = parse_parameters(values)
    plan_run(parameters)  # every parameter checked here, before Prefect starts or any data is read
    os.environ["PRIVSYNTH_CLI_RUN"] = "1"  # the flow then stops at once on SIGTERM (flows.synthesize)
    if prefect_api_url() is None:
        result = run_in_process(parameters)
    else:
        from flows.synthesize import synthesize

        result = synthesize(parameters)
    _print_run_summary(result)
    return 0


def command_forecast(args: argparse.Namespace) -> int:
    from privsynth.report.forecast import forecast, format_forecast
    from privsynth.run.parameters import bundled_example, parse_parameters
    from privsynth.run.plan import plan_run
    from privsynth.schema import load_schema
    from privsynth.schema.encoding import domain_of

    schema = load_schema(args.schema_file or bundled_example()[1])
    values = {"mechanism": args.mechanism, "epsilon": args.epsilon, "delta": args.delta,
              "mechanism_options": _parse_options(args.option), "public_rows": args.public_rows, "rows": 1}
    # No data is read: the plan only checks the parameters against the schema.
    plan = plan_run(parse_parameters(values), schema=schema, in_memory=True)
    result = forecast(args.mechanism, plan.cost, args.epsilon, None if plan.cost.pure_epsilon else args.delta,
                      domain_of(plan.schema), args.public_rows, plan.mechanism.caps_rows)
    if plan.mechanism.forecast_cost is not None:  # the mechanism's own time and memory model
        from dataclasses import asdict, replace

        cost = plan.mechanism.forecast_cost(plan.mechanism_config, domain_of(plan.schema))
        result = replace(result, cost=asdict(cost))
    print(json.dumps(result.to_json(), indent=2) if args.json else format_forecast(result))
    return 0


def command_feasibility(args: argparse.Namespace) -> int:
    from privsynth.mechanisms.private_sampling.feasibility import feasibility_for_schema, format_feasibility
    from privsynth.schema import load_schema

    report = feasibility_for_schema(load_schema(args.schema_file), args.rows_available, args.epsilon, k=args.rows,
                                    d=args.degree)
    print(json.dumps(report, indent=2) if args.json else format_feasibility(report))
    return 0


def command_budget(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from privsynth.privacy.ledger import BudgetLedger, LedgerError, format_status
    from privsynth.run.parameters import ParameterError
    from privsynth.run.plan import check_ledger_url

    if args.ledger is not None:
        check_ledger_url(args.ledger)
    try:
        ledger = BudgetLedger(args.ledger)
        if args.budget_command == "set":
            from privsynth.privacy.accounting import DEFAULT_DELTA

            ledger.set_budget(args.dataset, args.epsilon, DEFAULT_DELTA if args.delta is None else args.delta,
                              pure=args.pure)
        statuses = ledger.status(args.dataset)
        print(format_status(statuses))
        if getattr(args, "next_run", None) is not None:
            from privsynth.privacy.ledger_records import after_next_run

            if args.dataset is None:
                raise ParameterError("budget show --next-run E needs a DATASET")
            if not args.next_run > 0:
                raise ParameterError(f"--next-run: expected an epsilon > 0, got {args.next_run:g}")
            costs = [record.cost() for record in ledger.history(args.dataset)]
            print(after_next_run(statuses[0], costs, args.next_run))
        print(f"ledger: {ledger.url}")
    except LedgerError:
        raise
    except ValueError as err:  # the ledger's argument checks (epsilon > 0, 0 < delta < 1, names)
        raise ParameterError(f"budget {args.budget_command}: {err}") from None
    except sa.exc.SQLAlchemyError as err:
        raise ParameterError(f"budget ledger cannot be used ({type(err).__name__}); check --ledger or "
                             "$PRIVSYNTH_LEDGER_URL") from None
    return 0


def command_schema_expectations(args: argparse.Namespace) -> int:
    """The schema's expectations as a GX 1.x suite or a dbt schema.yml, for a team's own project (no data read)."""
    from privsynth.engine.dbt_export import expectations_text
    from privsynth.io import atomic_write_bytes
    from privsynth.schema import load_schema

    text, what = expectations_text(load_schema(args.schema_file), args.format)
    if args.output is None:
        print(text, end="")
    else:
        atomic_write_bytes(args.output, text.encode())
        print(f"privsynth schema expectations: wrote {args.output} ({what})")
    return 0


def command_schema(args: argparse.Namespace) -> int:
    if args.schema_command == "expectations":
        return command_schema_expectations(args)
    from privsynth.discovery import DraftOptions, default_name, parse_bounds, parse_categories, write_draft
    from privsynth.discovery.contracts import read_public_sources

    if args.ledger is not None:
        from privsynth.run.plan import check_ledger_url

        check_ledger_url(args.ledger)
    options = DraftOptions(name=args.name or default_name(args.input), epsilon=args.epsilon, dataset=args.dataset,
                           ledger=args.ledger, bounds=parse_bounds(args.bounds), bins=args.bins,
                           categories=parse_categories(args.categories),
                           require_budget=not args.unlimited, peek_without_dp=args.peek_without_dp,
                           public_rows=args.public_rows,
                           public=read_public_sources(args.public, args.public_model, args.input,
                                                      trust_data_derived=args.trust_data_derived_contracts))
    if args.peek_without_dp:
        print("privsynth: WARNING: --peek-without-dp reads the exact values: the draft is NOT differentially private "
              "and leaks the data; do not share it", file=sys.stderr)
    from privsynth.discovery.contract_trust import derived_notice

    if (notice := derived_notice(options.public)) is not None:  # rule 10: said once
        print(f"privsynth: {notice}", file=sys.stderr)
    result = write_draft(args.input, args.output, options, overwrite=args.force)
    print(f"privsynth schema draft: wrote {args.output} ({result.columns} columns, {result.dropped} proposed dropped)")
    if args.peek_without_dp:
        print("  NOT DP: categories and bins are exact values from the rows; replace them with public values")
    elif result.cost is None:
        print("  no value was read; fill the TODOs from public documentation before `privsynth run`")
    else:
        print(f"  DP pass: {result.read} columns read, rho {result.cost.rho:.6g}-zCDP charged to dataset "
              f"{result.dataset!r} (epsilon {args.epsilon:g} at delta {options.delta:g}); review the file")
    return 0


def command_mechanisms(_: argparse.Namespace) -> int:
    from privsynth.mechanisms import DEFAULT_MECHANISM
    from privsynth.mechanisms.catalogue import describe_mechanisms

    print(describe_mechanisms(DEFAULT_MECHANISM))
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``privsynth`` command. ``argv`` None: this process's own command line (the installed entry point);
    a list: a call from a host process, whose SIGTERM handling is left as it was (``_sigterm_stops_this_command``)."""
    with _sigterm_stops_this_command(own_process=argv is None):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    # Without a Prefect server, runs use Prefect's ephemeral API; on a busy 2-core machine it can take
    # longer to start than Prefect's 20 s default.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Prefect's own telemetry off: the temporary API's analytics heartbeat races the run for its SQLite
    # database ("database is locked" tracebacks) and logs "Failed to send telemetry" offline;
    # DO_NOT_TRACK turns off the client's usage events.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    args = build_parser().parse_args(argv)
    handlers = {"run": command_run, "feasibility": command_feasibility, "forecast": command_forecast,
                "budget": command_budget, "schema": command_schema, "mechanisms": command_mechanisms}
    try:
        return handlers[args.command](args)
    except _known_errors() as err:
        if _STOP["requested"]:
            print(_stopped_line(), file=sys.stderr)
            return 143
        print(f"privsynth: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit:
        if _STOP["requested"]:
            print(_stopped_line(), file=sys.stderr)
            return 143
        raise


if __name__ == "__main__":
    sys.exit(main())
