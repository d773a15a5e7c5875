"""One Prefect task per stage. Each is thin: artifact paths in -> library call -> artifact paths out.

Tasks pass paths and small public facts, never DataFrames, and persist no results, so raw rows never
reach Prefect's result storage (DESIGN section 5.4). I/O tasks retry; the mechanism task never does.
"""
