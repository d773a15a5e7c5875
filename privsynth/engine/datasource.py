"""The private side of a run: open the data where it lives, for counting.

``open_data(data, schema)`` accepts what ``privsynth.synthesize`` accepts: a source URL or path (the
``--input`` forms of ``privsynth.io``), a pandas or polars DataFrame, a pyarrow Table or Dataset. It
returns the statistics engine's source (``privsynth.engine``): the only object of a run that touches
rows, and it brings back aggregates only:

* ``validate()``: the schema's expectations (``privsynth.engine.expectations``), count-free and value-free;
* ``histogram()``: the distinct level-code records and their counts (``privsynth.schema.workload.Histogram``),
  the one statistic every mechanism is computed from.

No copy of the rows is made; the histogram the run keeps goes to its owner-only private folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privsynth.errors import ValidationFailedError  # noqa: F401  (re-exported: raised here)
from privsynth.schema import Schema


def open_data(data: Any, schema: Schema):
    """The engine's source for one run; reads metadata only (errors name the source and what was expected)."""
    from privsynth.engine import open_source

    return open_source(str(data) if isinstance(data, Path) else data, schema)
