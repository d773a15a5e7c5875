"""One Prefect task per stage of ``privsynth.run.stages``. Each is thin: the same stage function the
Python API calls, wrapped as a task.

Tasks persist no results and cache nothing, so no private value reaches Prefect's result storage
(docs/design.md 5.4). Reading and writing stages retry on transient errors; the mechanism task
never retries (a retry must not draw fresh noise: docs/design.md 5.3, and the ledger's noise claim refuses
a second draw anyway).
"""
