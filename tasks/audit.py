"""Stage 6: the accuracy audit (internal: it reads the real data, so it is not DP)."""

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from privsynth.audit import build_audit, headline, render_markdown
from privsynth.config import RunParameters, plan_run
from privsynth.encoding import domain_of
from privsynth.io import atomic_write_bytes, atomic_write_json
from privsynth.pipeline import fault_point, iter_codes, read_codes_of_table
from privsynth.runfolder import RunFolder
from tasks.common import IO_RETRIES, TASK_DEFAULTS

import numpy as np


@task(name="audit", **TASK_DEFAULTS, **IO_RETRIES)
def audit_task(parameters: RunParameters, run_dir: str) -> dict:
    fault_point("before_audit")  # test hook
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    domain = domain_of(plan.schema)
    real = np.concatenate(list(iter_codes(folder.require("bits.parquet"), domain)))
    synthetic = read_codes_of_table(folder.require("synthetic.parquet"), plan.schema)
    audit = build_audit(real, synthetic, plan.schema, domain, folder.path, target_column=plan.parameters.audit_target)
    plots = sorted(Path(p).name for p in audit.get("plots", []))
    atomic_write_json(folder.file("audit.json"), audit)
    atomic_write_bytes(folder.file("audit.md"), render_markdown(audit, plots).encode())
    folder.record("audit", ["audit.json", "audit.md", *plots])
    rows = [{"k": k, **{m: round(v, 4) if isinstance(v, float) else v for m, v in figures.items()}}
            for k, figures in audit["marginals"].items()]
    create_table_artifact(key="privsynth-audit", table=rows,
                          description="INTERNAL (not DP): marginal errors of the synthetic table against the real one")
    create_markdown_artifact(key="privsynth-audit-report", markdown=render_markdown(audit, []),
                             description="INTERNAL (not DP) audit report")
    line = headline(audit)
    get_run_logger().info("%s", line)
    return {"headline": line, "marginals": audit["marginals"]}
