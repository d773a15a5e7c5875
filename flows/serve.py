"""Serve the synthesis flow so the Prefect UI can trigger runs with the parameter form.

    prefect server start                     # terminal 1: the API and UI at http://127.0.0.1:4200
    PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.serve   # terminal 2

This registers the deployment "privsynth-synthesize/adult-nightly" (scheduled daily at 02:00 UTC on
the bundled Adult example) and waits for runs: scheduled ones, and ones started from the UI's
"Run > Custom run" form, whose fields are RunParameters'.
"""

from __future__ import annotations

import argparse

from flows.synthesize import synthesize
from privsynth.config import RunParameters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="adult-served")
    parser.add_argument("--cron", default="0 2 * * *", help="schedule (cron, UTC); '' for none")
    args = parser.parse_args()
    synthesize.serve(
        name=args.name,
        cron=args.cron or None,
        parameters={"parameters": RunParameters().model_dump(mode="json")},
        tags=["privsynth"],
        description="DP synthetic table (privsynth). Parameters are checked before any data is read.",
    )


if __name__ == "__main__":
    main()
