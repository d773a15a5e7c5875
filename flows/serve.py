"""Serve the synthesis flow so the Prefect UI can trigger runs with the parameter form.

    prefect server start                     # terminal 1: the API and UI at http://127.0.0.1:4200
    PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.serve   # terminal 2

This registers the deployment "privsynth-synthesize/adult-served" (scheduled daily at 02:00 UTC on
the bundled Adult example; ``--cron ''`` for none) and waits for runs: scheduled ones, and ones
started from the UI's "Run > Custom run" form, whose fields are RunParameters'. It has its own name:
the work-pool deployments of deployments/prefect.yaml ("adult-nightly", ...) are left as they are.
Every scheduled run is a new release charged to the dataset's budget, so schedule either this or
"adult-nightly", not both. Runs execute in child processes of this one, with Prefect's telemetry
and Great Expectations' analytics off unless the environment says otherwise.
"""

from __future__ import annotations

import argparse
import os

from flows.synthesize import synthesize
from privsynth.run.parameters import RunParameters

SERVED_NAME = "adult-served"
QUIET_ENV = {"DO_NOT_TRACK": "1", "GX_ANALYTICS_ENABLED": "false"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=SERVED_NAME)
    parser.add_argument("--cron", default="0 2 * * *", help="schedule (cron, UTC); '' for none")
    args = parser.parse_args()
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)  # inherited by every run's process
    synthesize.serve(
        name=args.name,
        cron=args.cron or None,
        parameters={"parameters": RunParameters().model_dump(mode="json")},
        tags=["privsynth"],
        description="DP synthetic table (privsynth). Parameters are checked before any data is read.",
    )


if __name__ == "__main__":
    main()
