"""The validate stage: one policy with or without a budget (docs/design.md 5.8; issue 36.3).

Only the file's structure (its column names) refuses a run; a record failing an expectation is dropped before
the mechanism (a per-record map the guarantee covers). Refusing on a failing record is the owner's explicit
option (``refuse_invalid_records``), stated as outside the guarantee wherever the run speaks. The exact
report, with counts, is owner-only (``internal-validation/``, never uploaded).
"""

from __future__ import annotations

from privsynth.engine.datasource import ValidationFailedError
from privsynth.io import atomic_write_json
from privsynth.run.context import RunContext
from privsynth.run.results import ValidationResult


def stage_validate(ctx: RunContext) -> ValidationResult:
    """The schema's expectations on the input, one policy with or without a budget (docs/design.md 5.8).

    Records failing an expectation are dropped before the mechanism (``guarded_validation``); only the file's
    structure (its column names) refuses. ``refuse_invalid_records`` (the owner's explicit option) refuses on a
    failing record instead: that run's outcome depends on an exact check, which the guarantee does not cover,
    and it says so. delta is never checked here against the exact n (an oracle for n): see
    ``check_delta_against_public_rows``.
    """
    return guarded_validation(ctx, ctx.handle().validate(), refuse=ctx.plan.parameters.refuse_invalid_records)


REFUSE_INVALID_RECORDS_CAVEAT = (
    "refuse_invalid_records (--refuse-invalid-records): whether this run was released or refused depended on an "
    "exact check of every record, which the DP guarantee does not cover; the guarantee covers what the release "
    "says, not the fact that it exists")


# Checks of the file's shape (its column names), not of any record: they may refuse a run exactly.
STRUCTURAL_EXPECTATIONS = frozenset({"privsynth_expect_table_column_names_to_be_unique",
                                     "expect_table_columns_to_match_set"})
OWNER_ONLY_VALIDATION = "internal-validation"


def guarded_public_validation(report, refuse: bool = False) -> dict:
    """validation.json: the structural checks, and the policy; no record-level result.

    Whether a record passed is private: a refusal on it (nothing charged, the column and bound named) was an
    exact, free oracle (one run on D, one on D plus a candidate record). Records failing a check are dropped,
    unless the owner asked to refuse (``refuse``): then ``success`` also says whether every record passed.
    """
    structural = [r for r in report.results if r.expectation_type in STRUCTURAL_EXPECTATIONS]
    success = all(r.success for r in structural) and (report.success or not refuse)
    policy = (f"{REFUSE_INVALID_RECORDS_CAVEAT}. Which check failed, with counts, is owner-only "
              "(internal-validation/validation.json)") if refuse else (
        "records failing the schema's expectations are dropped before the mechanism (a per-record map; the "
        "guarantee covers it); whether any was, and which check, is owner-only (internal-validation/validation.json)")
    return {"success": success, "schema": report.schema_name,
            "schema_hash": report.schema_hash, "visibility": "public",
            "record_checks": policy, "results": [r.public_json() for r in structural]}


def guarded_validation(ctx: RunContext, report, refuse: bool = False) -> ValidationResult:
    """The validate stage (docs/design.md 5.8): only the file's structure may refuse the run.

    Record-level checks (types, bounds, categories, missing values, shares, rows) become a per-record map:
    failing records are dropped from every statistic, so whether a release exists never depends on an exact
    check. ``refuse``: the owner's explicit option to refuse on a failing record instead (not covered by the
    guarantee; the message says so, value-free and count-free). The exact report, with counts, is owner-only
    (0600 in a 0700 folder, never uploaded).
    """
    public = guarded_public_validation(report, refuse)
    atomic_write_json(ctx.folder.file("validation.json"), public)
    ctx.folder.record("validate", ["validation.json"], success=public["success"])
    if ctx.folder.remote is None:  # a remote run folder is shared storage: the exact report stays off it
        folder = ctx.folder.file(OWNER_ONLY_VALIDATION)
        folder.mkdir(mode=0o700, exist_ok=True)
        atomic_write_json(folder / "validation.json", {**report.to_json(), "visibility": "owner-only (not DP)"},
                          private=True)
    structural = [r["message"] for r in public["results"] if not r["success"]]
    if structural:
        raise ValidationFailedError(f"validation failed, nothing was charged: {'; '.join(structural)} "
                                    f"(details: {ctx.folder.file('validation.json')})")
    if not public["success"]:  # refuse: the owner's option, stated as outside the guarantee
        message = "; ".join(report.public_failure_message().splitlines())
        raise ValidationFailedError(f"validation failed, nothing was charged: {message}; refused because of "
                                    f"--refuse-invalid-records: this refusal is an exact check of the records, not "
                                    f"covered by the DP guarantee (details, owner-only: "
                                    f"{ctx.folder.file(OWNER_ONLY_VALIDATION)}/validation.json)")
    if refuse:
        ctx.progress(f"validate: every record of schema {ctx.schema.name!r} passed (--refuse-invalid-records: this "
                     "run's outcome is not covered by the DP guarantee)")
        return ValidationResult(drop_faulty_records=False)
    ctx.progress(f"validate: schema {ctx.schema.name!r}: records failing an expectation are dropped, never a refusal "
                 "(the exact result is owner-only)")
    return ValidationResult(drop_faulty_records=True)
