"""Opt-in: the INTERNAL (not DP) audit against the real data, written to internal-audit/ (or the
owner's --audit-location).

Its figures are never returned to Prefect: the task returns only where the audit is, and the flow
publishes no artifact of it (docs/design.md 5.4).
"""

from prefect import task

from privsynth.run.results import AuditResult
from privsynth.run.stages import stage_audit
from tasks.common import TASK_DEFAULTS


def audit_kept_local(ctx, statistics, rounding) -> AuditResult:
    audit = stage_audit(ctx, statistics, rounding)
    return AuditResult.of(audit.location, {})  # where the audit is, never what it says


audit_task = task(audit_kept_local, name="audit (internal)", **TASK_DEFAULTS)
