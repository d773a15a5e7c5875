"""How a source value reads, as total expressions (docs/design.md 5.9): no value makes a query fail.

Every expression the engine evaluates over the rows (discovery's facts and value counts, validation, binning,
the fine-decoding counts) reads values through these functions, so the rules of what a value IS are written
once, and each of them is defined for every value a source can hold:

* text: the one text rule (``clean_text``): blanks around a value are not part of it, and a blank value
  is missing; every stage compares the same cleaned text;
* numbers from text: ``TRY_CAST`` (a value that is no number is NULL, never an error), with ``1_000`` read as
  text, as pandas reads it; ``nan`` spelled out is a NaN (missing), ``inf`` and ``1e400`` are infinite;
* missing words: where a column holds numbers or moments written as text, the words pandas reads as a missing
  field (``MISSING_WORDS``: "N/A", "NULL", "None", ...) are its missing values, in its DP facts as in every later
  read, never unreadable text: a column of counts with "N/A" for one row in ten is a column of counts;
* whole numbers: ``is_whole`` never casts a value that does not fit an int64 (SQL's ``FLOOR`` compiles to
  a cast to BIGINT: 1e20 or 2^63 overflowed it, and SQL evaluates both sides of an AND);
* dates and timestamps: only moments in years 1-9999 are dates; ``infinity``, year 294247 or year 0 are not
  (each backend's range and epoch arithmetic differs beyond them, and some raise).

The classes a hostile value falls in are ordinary ones (missing, not a number, not a date, out of domain),
counted like any other value; a run never ends on one (tests/test_neighbour_fuzz.py).
"""

from __future__ import annotations

import datetime as _dt

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from privsynth.schema.temporal import GRAIN_SECONDS, GRAINS

# Every double of at least this magnitude is a whole number; below it FLOOR's result fits a BIGINT.
WHOLE_LIMIT = 2.0**53
FIRST_MOMENT = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)
LAST_MOMENT = _dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_dt.UTC)
FIRST_DAY, LAST_DAY = _dt.date(1, 1, 1), _dt.date(9999, 12, 31)


def clean_text(raw: ir.Value) -> ir.StringValue:
    """The one text rule: the value without blanks around it; a blank value is missing (NULL)."""
    return raw.cast("string").strip().nullif("")


def finite(x: ir.NumericValue) -> ir.BooleanValue:
    """A present, finite number (False, never NULL, for NULL, NaN and +-inf)."""
    return x.notnull() & ~x.isnan().fill_null(True) & ~x.isinf().fill_null(True)


def is_whole(x: ir.NumericValue) -> ir.BooleanValue:
    """A finite whole number; defined for every double (the FLOOR is taken of a value that fits)."""
    ok = finite(x)
    small = ok & (x.abs() < WHOLE_LIMIT)
    safe = ibis.ifelse(small, x, ibis.literal(0.0))
    return ok & (~small | (safe.floor().cast("float64") == safe))


DECIMALS_LIMIT = 1e6  # a stored number's decimals are read below this magnitude (4 decimals stay exact there)


def tens_of(x: ir.IntegerValue, coarsest: int) -> ir.IntegerValue:
    """The place a stored whole number is whole in, as ``decimals_of`` reads it with ``fewest`` = -``coarsest``
    (-3: a multiple of 1000, ... 0: units), by integer remainders; NULL for a missing value and for zero (no
    evidence of a step either way). No cast: an unsigned 64-bit value beyond BIGINT has its remainders too."""
    tests = [(x % (10 ** j) == 0, -j) for j in range(coarsest, 0, -1)]
    return ibis.ifelse(x.isnull() | (x == 0), ibis.null("int64"), ibis.cases(*tests, else_=0))


def decimals_of(x: ir.NumericValue, most: int, fewest: int = 0) -> ir.IntegerValue:
    """The fewest decimals k (``fewest`` .. most - 1) a stored double is written with (its value times 10^k within a
    billionth of a whole number: a decimal's binary round-off), ``most`` for more; NULL for a value that is
    missing, non-finite, beyond WHOLE_LIMIT, or beyond DECIMALS_LIMIT and not whole. A negative k is a whole
    multiple of 10^-k (-1: tens, -3: thousands), read for every whole value below WHOLE_LIMIT; zero, a multiple of
    every power, is NULL where ``fewest`` is negative: it shows no step either way (a column of zeros and ones is no
    column of thousands, and wind directions of 0 are whole tens). Total: FLOOR only meets values that fit."""
    x = x.cast("float64")  # a DECIMAL column too
    fits = finite(x) & (x.abs() < WHOLE_LIMIT)
    small = fits & (x.abs() < DECIMALS_LIMIT)
    safe = ibis.ifelse(fits, x, ibis.literal(0.0))
    nearest = (safe + 0.5).floor()
    whole = (safe - nearest.cast("float64")).abs() <= ibis.least(1e-9 * ibis.greatest(safe.abs(), 1.0), 0.5)
    rounded = nearest.cast("int64")  # the whole number's remainders: it fits a BIGINT below WHOLE_LIMIT
    tests = [(whole & (rounded % (10 ** -k) == 0), k) for k in range(fewest, 0)]
    tests.append((whole, 0))
    for k in range(max(fewest, 1), most):
        scaled = safe * float(10 ** k)
        nearest = (scaled + 0.5).floor().cast("float64")
        tests.append((small & ((scaled - nearest).abs() <= 1e-9 * ibis.greatest(scaled.abs(), 1.0)), k))
    beyond = ibis.ifelse(small, ibis.literal(most, type="int64"), ibis.null("int64"))
    read = fits & (x != 0.0) if fewest < 0 else fits
    return ibis.ifelse(read, ibis.cases(*tests, else_=beyond), ibis.null("int64"))


# ---------------------------------------------------------------- formats: what text reads as what, total

# The text forms read as numbers and moments. A backend's own cast is applied only to text that matches
# them, so it never meets text it would refuse: PostgreSQL has no TRY_CAST (ibis writes a plain CAST there,
# which raised on 'red'), casts 1e400 and 1e-400 with an error, and refuses month 13 or 30 February.
# A decimal number whose magnitude fits a double whatever its digits: at most 20 integer digits, 30
# decimals, an exponent of at most 279 either way; inf, infinity and nan in any case (nan: missing). An
# integer part with a leading zero ("02134", "007") is no number: such digit strings are codes (text).
_MANTISSA = r"((0|[1-9][0-9]{0,19})(\.[0-9]{0,30})?|\.[0-9]{1,30})"
NUMBER_FORM = (rf"^[+-]?{_MANTISSA}([eE][+-]?([0-9]{{1,2}}|1[0-9]{{2}}|2[0-7][0-9]))?$"
               r"|^[+-]?[iI][nN][fF]([iI][nN][iI][tT][yY])?$|^[nN][aA][nN]$")
# Numbers written for people: thousands separators, a dollar sign, a percent sign. A column's number format
# is a fact decided under DP (discovery/facts.py) or stated in its schema; its values are written back in it.
_GROUPED = r"[0-9]{1,3}(,[0-9]{3}){1,6}"
NUMBER_FORMATS: dict[str, str] = {
    "thousands": rf"^[+-]?{_GROUPED}(\.[0-9]{{1,30}})?$",
    "currency": rf"^[+-]?\$({_GROUPED}|0|[1-9][0-9]{{0,19}})(\.[0-9]{{1,30}})?$",
    "percent": r"^[+-]?(0|[1-9][0-9]{0,19})(\.[0-9]{1,30})? ?%$",
}
# Dates written day-first, month-first or year-first, with slashes or dots, and moments written year-first
# ("2020/06/04 20:45:34") or slashed ("9/30/1990 0:00:00"), as many exports write them: read by turning them
# into ISO text first. A moment's hour may have one digit; its seconds may be left out.
_TIME_OF_DAY = r"[T ]([0-9]{1,2})(:[0-9]{2}(:[0-9]{2})?)$"
TIME_OF_DAY = r"[T ]([01]?[0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$"  # a valid one, as ISO text reads it
SLASH_DATE = r"^([0-9]{1,2})/([0-9]{1,2})/([0-9]{4})$"
SLASH_MOMENT = r"^([0-9]{1,2})/([0-9]{1,2})/([0-9]{4})" + _TIME_OF_DAY
VALID_SLASH_MOMENT = r"^[0-9]{1,2}/[0-9]{1,2}/[0-9]{4}" + TIME_OF_DAY  # its time of day a valid one
DOT_DATE = r"^([0-9]{1,2})\.([0-9]{1,2})\.([0-9]{4})$"
YEAR_FIRST_DATE = r"^([0-9]{4})/([0-9]{1,2})/([0-9]{1,2})$"
YEAR_FIRST_MOMENT = r"^([0-9]{4})/([0-9]{1,2})/([0-9]{1,2})" + _TIME_OF_DAY
ISO_DATE_TEXT = r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$"  # ISO text itself: a typed source's string column of dates
# format -> (form, groups of year, month, day, and of the hour, 0 for none: the minutes and seconds follow it)
DATE_FORMATS: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "%m/%d/%Y": (SLASH_DATE, (3, 1, 2, 0)),
    "%d/%m/%Y": (SLASH_DATE, (3, 2, 1, 0)),
    "%d.%m.%Y": (DOT_DATE, (3, 2, 1, 0)),
    "%Y/%m/%d": (YEAR_FIRST_DATE, (1, 2, 3, 0)),
    "%Y/%m/%d %H:%M:%S": (YEAR_FIRST_MOMENT, (1, 2, 3, 4)),
    "%m/%d/%Y %H:%M:%S": (SLASH_MOMENT, (3, 1, 2, 4)),
    "%d/%m/%Y %H:%M:%S": (SLASH_MOMENT, (3, 2, 1, 4)),
    # ISO text a typed source stores as strings, written back as text (read as any ISO text is)
    "%Y-%m-%d": (ISO_DATE_TEXT, (1, 2, 3, 0)),
    "%Y-%m-%dT%H:%M:%S": (ISO_DATE_TEXT, (1, 2, 3, 0)),
    "%Y-%m-%dT%H:%M:%SZ": (ISO_DATE_TEXT, (1, 2, 3, 0)),  # UTC moments marked with a Z, as JSON and APIs write them
    "%Y-%m-%d %H:%M:%S": (ISO_DATE_TEXT, (1, 2, 3, 0)),  # a moment as SQL writes it as text
    # moments written with a zone offset ("2021-05-07 03:05:20-04:00"): read in UTC, written back in UTC (+00:00)
    "%Y-%m-%dT%H:%M:%S+00:00": (ISO_DATE_TEXT, (1, 2, 3, 0)),
    "%Y-%m-%d %H:%M:%S+00:00": (ISO_DATE_TEXT, (1, 2, 3, 0)),
}
ISO_OFFSET = r"[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?$"  # the zone offset that ends an ISO moment
_YEAR = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = ("((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              "|02-(0[1-9]|1[0-9]|2[0-8]))")
ISO_DATE = f"({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = "[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,9})?)?"
_ZONE = "(Z|[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?)?"
ISO_MOMENT_FORM = f"^{ISO_DATE}({_TIME}{_ZONE})?$"


# The words pandas' read_csv reads as a missing field (its default ``na_values``; the empty field aside: a blank
# value is missing by the text rule already). Where a column's values are numbers or moments, such a word is a
# missing value of it (``missing_word``); in a column of text it stays the text it is ("NA" may be Namibia).
MISSING_WORDS = ("#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
                 "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def missing_word(text: ir.StringValue) -> ir.BooleanValue:
    """(Cleaned) text that is one of MISSING_WORDS, or that reads as a NaN (``NUMBER_FORM``'s "nan" in any case);
    False, never NULL, for NULL and any other text."""
    return (text.isin(MISSING_WORDS) | number_from_text(text).isnan()).fill_null(False)


def _when(condition: ir.BooleanValue, text: ir.StringValue) -> ir.StringValue:
    return ibis.ifelse(condition, text, ibis.null("string"))


def number_from_text(text: ir.StringValue, number_format: str | None = None) -> ir.FloatingValue:
    """A float64 read from (cleaned) text in ``NUMBER_FORM``, or in ``number_format`` (a key of
    ``NUMBER_FORMATS``: "1,234.50", "$9", "12%" read as 1234.5, 9, 12); NULL for any other text."""
    plain = _when(text.re_search(NUMBER_FORM), text).cast("float64")
    if number_format in (None, "plain"):  # "plain": numbers stored as strings, written as NUMBER_FORM reads them
        return plain
    body = text.replace(",", "").replace("$", "").replace("%", "").strip()
    written = _when(text.re_search(NUMBER_FORMATS[number_format]) & body.re_search(NUMBER_FORM), body)
    return ibis.ifelse(written.notnull(), written.cast("float64"), plain)


def iso_date_text(text: ir.StringValue, date_format: str) -> ir.StringValue:
    """ISO text (YYYY-MM-DD, and " HH:MM[:SS]" for a moment) of a date or moment written in ``date_format``;
    NULL where the text is not in that form."""
    form, (year, month, day, hour) = DATE_FORMATS[date_format]
    part = lambda group: text.re_extract(form, group)  # noqa: E731
    iso = part(year) + "-" + part(month).lpad(2, "0") + "-" + part(day).lpad(2, "0")
    return _when(text.re_search(form), iso + " " + part(hour).lpad(2, "0") + part(hour + 1) if hour else iso)


def moment_from_text(text: ir.StringValue, date_format: str | None = None) -> ir.TimestampValue:
    """A UTC timestamp read from ISO text (an offset converts to UTC; none: UTC), or from a date in
    ``date_format`` (a key of ``DATE_FORMATS``); NULL for any other text, an impossible date included."""
    iso = text if date_format is None else ibis.ifelse(text.re_search(ISO_MOMENT_FORM), text,
                                                        iso_date_text(text, date_format))
    return _when(iso.re_search(ISO_MOMENT_FORM), iso).cast(dt.Timestamp(timezone="UTC"))



def in_calendar(moment: ir.Value) -> ir.Value:
    """``moment`` (a DATE or TIMESTAMP) where it lies in years 1-9999, else NULL (infinity, year 294247, ...). A
    nanosecond timestamp (pandas' own unit, so many a Parquet file's) is read in microseconds: the calendar's ends
    are no nanosecond timestamps, and the comparison with them failed the query for every such column."""
    if moment.type().is_timestamp() and (moment.type().scale or 0) > 6:
        moment = moment.cast(dt.Timestamp(timezone=moment.type().timezone, scale=6))
    if moment.type().is_date():
        low, high = ibis.literal(FIRST_DAY), ibis.literal(LAST_DAY)
    elif moment.type().timezone is not None:
        low, high = ibis.literal(FIRST_MOMENT, type=moment.type()), ibis.literal(LAST_MOMENT, type=moment.type())
    else:
        low = ibis.literal(FIRST_MOMENT.replace(tzinfo=None), type=moment.type())
        high = ibis.literal(LAST_MOMENT.replace(tzinfo=None), type=moment.type())
    return ibis.ifelse((moment >= low) & (moment <= high), moment, ibis.null(moment.type()))


def moment_grain(moment: ir.TimestampValue) -> ir.IntegerValue:
    """The index in GRAINS of the coarsest unit a moment (in years 1-9999) is a whole number of: midnight is a
    day, 05:00 an hour, 05:30 a minute, anything else a second; NULL for a missing or out-of-calendar moment."""
    # truncated to its second first: backends round a fractional epoch each their own way when casting it
    seconds = in_calendar(moment).truncate("s").epoch_seconds().cast("int64")
    whole = [(seconds % GRAIN_SECONDS[g] == 0, i) for i, g in enumerate(GRAINS[:-1])]
    return ibis.ifelse(seconds.isnull(), ibis.null("int64"), ibis.cases(*whole, else_=len(GRAINS) - 1))


__all__ = ["DATE_FORMATS", "GRAINS", "GRAIN_SECONDS", "NUMBER_FORMATS", "WHOLE_LIMIT", "clean_text", "finite",
           "in_calendar", "is_whole", "iso_date_text", "moment_from_text", "moment_grain", "number_from_text"]
