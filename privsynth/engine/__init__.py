"""Statistics where the data lives (docs/design.md section 6).

From the schema, the engine builds once the binning expressions (``binning``: level codes identical to
``encoding.encode_codes``) and the aggregate queries the mechanisms need (``statistics``: row count,
the sparse weighted histogram, k-way marginal counts), as ibis expressions, and runs them on the
backend that holds the data (``backends``: DuckDB by default, PostgreSQL, Spark, any ibis backend).
Only count tables come back. ``validation`` runs the schema checks as one aggregate query; ``sandbox``
confines user SQL.

    from privsynth.engine import open_source
    with open_source("data/*.parquet", schema) as src:
        report = src.validate()
        hist = src.histogram()
"""

from privsynth.engine.backends import EngineOptions
from privsynth.engine.binning import Fault
from privsynth.engine.sandbox import SandboxError, check_select
from privsynth.engine.spark import spark_session
from privsynth.engine.statistics import DEFAULT_MAX_HISTOGRAM_ROWS, Source, open_source
from privsynth.io.connections import connect_url

__all__ = ["DEFAULT_MAX_HISTOGRAM_ROWS", "EngineOptions", "Fault", "SandboxError", "Source", "check_select",
           "connect_url", "open_source", "spark_session"]
