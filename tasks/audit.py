"""Opt-in: the INTERNAL (not DP) audit against the real data, written to internal-audit/.

Its figures are never returned to Prefect: the task returns nothing but a marker, and the flow
publishes no artifact of it (docs/design.md 5.4).
"""

from prefect import task

from privsynth.run.stages import stage_audit
from tasks.common import TASK_DEFAULTS


def audit_kept_local(ctx, statistics, rounding) -> dict:
    stage_audit(ctx, statistics, rounding)
    return {"internal_audit": str(ctx.folder.file("internal-audit"))}


audit_task = task(audit_kept_local, name="audit (internal)", **TASK_DEFAULTS)
