"""Values in their written form (docs/design.md 3): a column with a ``format`` is read from and written back in it.

The SQL side (``privsynth.engine.values``) reads a source's text in these forms; this is the pandas side, for
the synthetic table: ``written_form`` writes decoded values as the source writes them ("1,234.50", "$9",
"12%", 03/04/2021), ``read_written`` reads them back (the report and the encoder read the synthetic table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsynth.schema.model import Column


def _number_text(col: Column, value: float) -> str:
    places = col.precision if col.type == "float" else 0
    body = f"{abs(value):,.{places}f}" if places is not None else f"{abs(value):,}"
    sign = "-" if value < 0 else ""
    if col.format == "thousands":
        return sign + body
    if col.format == "currency":
        return f"{sign}${body}"
    plain = f"{value:.{places}f}" if places is not None else repr(float(value))
    return plain if col.format == "plain" else f"{plain}%"


def written_form(col: Column, values: pd.Series) -> pd.Series:
    """A decoded column as the source writes it (``col.format``): "1,234.50", "$9", "12%", 03/04/2021,
    2021/03/04 20:45:34; the values themselves when the column has no format. Missing stays missing."""
    if col.format is None:
        return values
    present = values.notna().to_numpy()
    out = np.full(len(values), None, dtype=object)
    if col.type in ("date", "timestamp"):
        out[present] = [d.strftime(col.format) for d in values[present]]
    else:
        out[present] = [_number_text(col, float(v)) for v in values[present]]
    return pd.Series(out, index=values.index, dtype=object)


def read_written(col: Column, series: pd.Series) -> pd.Series:
    """The values of a column written in ``col.format`` (``written_form``'s inverse); others as they are."""
    if col.format is None or series.dtype.kind in "fiumM":
        return series
    text = series.astype(object).where(series.notna(), None)
    if col.type in ("date", "timestamp"):
        return pd.to_datetime(text, format=col.format, errors="coerce")
    cleaned = text.map(lambda v: v.replace(",", "").replace("$", "").replace("%",
                                                                             "").strip() if isinstance(v, str) else v)
    return pd.to_numeric(cleaned, errors="coerce")
