"""Public metadata of a table: the schema model (``model``), temporal types (``temporal``), resource
limits (``limits``), the binarisation (``encoding``) and marginal workloads and histograms (``workload``).

Everything here is public: a schema is written from documentation, or drafted under DP and charged
(``privsynth.discovery``). The model's names are re-exported: ``from privsynth.schema import Schema``.
"""

from privsynth.schema.model import (
                                    MISSING_LABEL,
                                    OUT_OF_DOMAIN_LABEL,
                                    Column,
                                    Schema,
                                    SchemaError,
                                    load_schema,
                                    parse_schema,
)

__all__ = ["MISSING_LABEL", "OUT_OF_DOMAIN_LABEL", "Column", "Schema", "SchemaError", "load_schema",
           "parse_schema"]
