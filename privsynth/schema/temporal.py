"""Dates and timestamps as numbers in a fixed unit, so the numeric machinery (bins, labels, codes) applies.

* ``date``: whole days since 1970-01-01;
* ``timestamp``: whole seconds since 1970-01-01T00:00:00 UTC. A value is truncated DOWN to its second
  (floor, also before 1970) before binning, in pandas and in the engine alike; a timestamp without a
  time zone is read as UTC, one with a zone is converted to UTC.

A date read from a timestamp is the timestamp's UTC calendar day (floor), and a timestamp read from a
date is that day's midnight UTC. Everything here is a pure function of public schema values or of one
value column; nothing is data-dependent.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pandas as pd

SECONDS_PER_DAY = 86_400
EPOCH_DATE = _dt.date(1970, 1, 1)
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
BIN_UNITS = ("year", "quarter", "month", "week", "day")
TEMPORAL_TYPES = ("date", "timestamp")
GRAINS = ("day", "hour", "minute", "second")  # the coarsest unit a moment is a whole number of (second: or finer)
GRAIN_SECONDS = {"day": 86_400, "hour": 3_600, "minute": 60}  # a timestamp column's ``resolution``, in seconds
MAX_GENERATED_EDGES = 100_001  # bin_by 'day' over 270 years; more bins than any schema limit allows


def _as_datetime(value: object) -> _dt.datetime:
    """A public schema value (ISO text, date, datetime) as an aware UTC datetime."""
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, _dt.date):
        moment = _dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = _dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO date or timestamp (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)") from None
    else:
        raise ValueError(f"expected an ISO date string, got {type(value).__name__}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.astimezone(_dt.UTC)


def to_unit(value: object, kind: str) -> float:
    """A public schema value (ISO text, date, datetime, or a number already in the unit) in ``kind``'s unit."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    moment = _as_datetime(value)
    if kind == "date":
        if moment.time() != _dt.time(0) and not isinstance(value, _dt.date):
            raise ValueError(f"{value!r} has a time of day; a date column's bounds and bins are dates")
        return float((moment.date() - EPOCH_DATE).days)
    seconds = (moment - EPOCH).total_seconds()
    if seconds != int(seconds):
        raise ValueError(f"{value!r} has fractions of a second; timestamp bounds and bins are whole seconds")
    return float(seconds)


def to_unit_last(kind: str) -> float:
    """The calendar's last day (a timestamp's: its last second) in the unit."""
    days = float((_dt.date(9999, 12, 31) - EPOCH_DATE).days)
    return days if kind == "date" else days * 86_400.0 + 86_399.0


def from_unit(x: float, kind: str) -> _dt.date | _dt.datetime:
    if kind == "date":
        return EPOCH_DATE + _dt.timedelta(days=int(x))
    return EPOCH + _dt.timedelta(seconds=int(x))


def format_unit(x: float, kind: str) -> str:
    """ISO text of a value in the unit: ``2019-01-01``, or ``2019-01-01T10:00:00`` (UTC; midnight as a date). Past
    the calendar's last day (the end of fine decoding's sub-bin that holds 9999-12-31 alone): that day and a "+"."""
    if x > (last := to_unit_last(kind)):
        return format_unit(last, kind) + "+"
    value = from_unit(x, kind)
    if isinstance(value, _dt.datetime):
        if value.time() == _dt.time(0):
            return value.date().isoformat()
        return value.replace(tzinfo=None).isoformat()
    return value.isoformat()


def _next_boundary(day: _dt.date, unit: str) -> _dt.date:
    """The first calendar boundary of ``unit`` strictly after ``day`` (weeks start on Monday)."""
    if unit == "day":
        return day + _dt.timedelta(days=1)
    if unit == "week":
        return day + _dt.timedelta(days=7 - day.weekday())
    if unit == "year":
        return _dt.date(day.year + 1, 1, 1)
    step = 3 if unit == "quarter" else 1
    month0 = (day.month - 1) // step * step + step  # 0-based month of the next boundary
    return _dt.date(day.year + month0 // 12, month0 % 12 + 1, 1)


def generated_edges(low: float, high: float, unit: str, kind: str) -> tuple[float, ...]:
    """Edges low, every calendar ``unit`` boundary strictly inside (low, high), high (public, data-free)."""
    if unit not in BIN_UNITS:
        raise ValueError(f"bin_by must be one of {list(BIN_UNITS)}, got {unit!r}")
    scale = 1 if kind == "date" else SECONDS_PER_DAY
    edges = [float(low)]
    day = EPOCH_DATE + _dt.timedelta(days=int(np.floor(low / scale)))
    while True:
        day = _next_boundary(day, unit)
        x = float((day - EPOCH_DATE).days * scale)
        if x >= high:
            break
        edges.append(x)
        if len(edges) > MAX_GENERATED_EDGES:
            raise ValueError(f"bin_by {unit!r} gives more than {MAX_GENERATED_EDGES - 1} bins; use a coarser unit")
    edges.append(float(high))
    return tuple(edges)


def values_in_unit(series: pd.Series, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(values in the unit as float64 with NaN for missing, mask of present values that are not dates).

    Reads pandas datetime64 (naive = UTC), Python dates/datetimes/Timestamps and ISO text; blank text is
    missing. Whole days (floor) for dates, whole seconds (floor) for timestamps.
    """
    if isinstance(series.dtype, pd.DatetimeTZDtype) or series.dtype.kind == "M":
        moments = pd.to_datetime(series, utc=True)
        not_date = np.zeros(len(series), dtype=bool)
    else:
        obj = series.astype(object).where(series.notna(), None)
        if pd.api.types.infer_dtype(obj, skipna=True) in ("string", "empty", "mixed"):
            obj = obj.map(lambda v: (v.strip() or None) if isinstance(v, str) else v)
        present = obj.notna().to_numpy()
        try:
            moments = pd.to_datetime(obj, utc=True, errors="coerce", format="ISO8601")
        except (TypeError, ValueError):  # objects pandas cannot read as a time at all
            moments = pd.Series(pd.NaT, index=series.index, dtype="datetime64[ns, UTC]")
        not_date = present & moments.isna().to_numpy()
    missing = pd.isna(moments).to_numpy()
    # datetime64 casts truncate towards zero; floor explicitly so 1969-12-31T23:59:59.5 is second -1
    # microseconds span +-290,000 years: no overflow for any date pandas can hold (0001-01-01 to 9999-12-31)
    naive = moments.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(dtype="datetime64[us]")
    raw = np.where(missing, 0, naive.view(np.int64))
    per = SECONDS_PER_DAY * 10**6 if kind == "date" else 10**6
    values = np.floor_divide(raw, per).astype(np.float64)
    values[missing] = np.nan
    return values, not_date
