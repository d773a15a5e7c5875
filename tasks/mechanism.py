"""Stage 4: the private mechanism. Never retried: a retry must not draw fresh noise (DESIGN 5.3)."""

from prefect import get_run_logger, task

from privsynth.config import RunParameters, plan_run
from privsynth.encoding import domain_of, one_hot_names
from privsynth.io import atomic_write_json, atomic_write_table
from privsynth.pipeline import release_stage
from privsynth.privacy.ledger import BudgetLedger
from privsynth.releases import ReleaseStore
from privsynth.runfolder import RunFolder
from tasks.common import TASK_DEFAULTS


@task(name="mechanism", retries=0, **TASK_DEFAULTS)
def mechanism_task(parameters: RunParameters, run_dir: str, release_key: str, release_store: str | None) -> dict:
    plan = plan_run(parameters)
    folder = RunFolder.load(run_dir)
    names = one_hot_names(plan.schema)
    outcome = release_stage(mechanism=plan.mechanism, config=plan.mechanism_config, bits_path=folder.require("bits.parquet"),
                            domain=domain_of(plan.schema), key=release_key, store=ReleaseStore(release_store),
                            ledger=BudgetLedger(plan.parameters.ledger), dataset=plan.dataset, delta=plan.parameters.delta,
                            seed=plan.parameters.seed, column_names=names)
    atomic_write_table(folder.file("release.parquet"), outcome.release.to_arrow(names))
    privacy = dict(outcome.privacy, reused_stored_release=outcome.reused)
    atomic_write_json(folder.file("privacy.json"), privacy)
    folder.record("mechanism", ["release.parquet", "privacy.json"], release_key=release_key,
                  privacy_spent=privacy["cost"], reused_stored_release=outcome.reused)
    logger = get_run_logger()
    if outcome.reused:
        logger.info("mechanism: reused the stored release %s; nothing charged", release_key[:12])
    else:
        logger.info("mechanism: %s release charged to dataset %r and stored", plan.mechanism.NAME, plan.dataset)
    return privacy
