"""How each row of a column is read for its DP facts (``facts.exact_counts``): the class it falls in (CLASSES, one per
row: missing, a whole or a fractional number, an ISO date or moment, a number or a date in a written form, other
text) and its slot of the PLACES histogram (a number's place, a moment's grain). Total ibis expressions: any text,
a hostile value included, reads as a class, never as an error (``engine.values`` holds the forms themselves).
"""

from __future__ import annotations

from privsynth.discovery.forms import TENS, ZERO

CLASSES = ("missing", "whole", "fraction", "date", "timestamp", "text",
           "thousands", "currency", "percent", "month_first", "day_first", "slash", "dot", "year_first",
           "year_first_time")
DATE_FORMAT_CLASSES = ("month_first", "day_first", "slash", "dot", "year_first", "year_first_time")


def read_text(text) -> dict:
    """What a (cleaned) text value reads as, each test once: the per-row columns ``row_class`` and
    ``decimals_bin`` take (a projection: the backend evaluates each regular expression once per row)."""
    from privsynth.engine.values import NUMBER_FORMATS, moment_from_text, number_from_text

    # "iso", "year_first_time" and "slash_time" are the moments read (NULL: none), each parsed once; the others
    # are tests. A slashed moment ("9/30/1990 0:00:00") counts in the slashed classes by its date (month-first,
    # day-first, or both), and in the decimals histogram's grain slots, which tell it from a slashed date.
    month_first_time = moment_from_text(text, "%m/%d/%Y %H:%M:%S")
    day_first_time = moment_from_text(text, "%d/%m/%Y %H:%M:%S")
    reads = {"text": text, "number": number_from_text(text), "iso": moment_from_text(text),
             "month_first": moment_from_text(text, "%m/%d/%Y").notnull() | month_first_time.notnull(),
             "day_first": moment_from_text(text, "%d/%m/%Y").notnull() | day_first_time.notnull(),
             "dot": moment_from_text(text, "%d.%m.%Y").notnull(),
             "year_first": moment_from_text(text, "%Y/%m/%d").notnull(),
             # a moment, not a test: row_class tests it, and text_grain reads its grain
             "year_first_time": moment_from_text(text, "%Y/%m/%d %H:%M:%S"),
             "slash_time": month_first_time.coalesce(day_first_time)}
    reads.update({f: number_from_text(text, f).notnull() for f in NUMBER_FORMATS})
    return reads


def row_class(reads: dict, declared: str, raw=None):
    """Per row, the index in CLASSES of a column's value (exactly one per row): from ``read_text``'s columns
    for text, from ``raw`` for a source kind ``declared`` (integer, float, boolean, date, timestamp). One CASE,
    first match wins, so the classes are exclusive by construction."""
    import ibis

    from privsynth.engine.values import NUMBER_FORMATS, in_calendar, is_whole

    index = {c: ibis.literal(i, type="int8") for i, c in enumerate(CLASSES)}
    if declared == "text":
        text, number = reads["text"], reads["number"]
        return ibis.cases(
            (text.isnull(), index["missing"]),
            (is_whole(number), index["whole"]),
            (number.notnull(), index["fraction"]),
            (reads["iso"].notnull() & (text.length() <= 10), index["date"]),
            (reads["iso"].notnull(), index["timestamp"]),
            *[(reads[f], index[f]) for f in NUMBER_FORMATS],
            (reads["month_first"] & reads["day_first"], index["slash"]),
            (reads["month_first"], index["month_first"]),
            (reads["day_first"], index["day_first"]),
            (reads["dot"], index["dot"]),
            (reads["year_first"], index["year_first"]),
            (reads["year_first_time"].notnull(), index["year_first_time"]),
            else_=index["text"])
    if declared in ("integer", "float"):
        value = raw.cast("float64")
        return ibis.cases((raw.isnull() | value.isnan().fill_null(True), index["missing"]),
                          (is_whole(value), index["whole"]), else_=index["fraction"])
    missing = (in_calendar(raw) if declared in ("date", "timestamp") else raw).isnull()
    present = {"date": "date", "timestamp": "timestamp"}.get(declared, "text")
    return ibis.cases((missing, index["missing"]), else_=index[present])


def decimals_bin(reads: dict):
    """The PLACES slot (0 .. PLACES - 1) of a text value that reads as a number in any written form (not in
    exponent notation), NULL for every other row: TENS plus the decimals written after the point ("2.50": 2), or,
    for a number written with none, TENS less the zeros its integer part ends in, at most TENS ("1,200": 2,
    "-40": 1; a zero "0", a multiple of every power, shows no step either way: ZERO)."""
    import ibis

    from privsynth.engine.values import NUMBER_FORMATS

    text = reads["text"]
    number = reads["number"].notnull()
    for f in NUMBER_FORMATS:
        number = number | reads[f]
    digits = ibis.ifelse(text.contains("."), text.re_extract(r"\.([0-9]*)", 1).length(), 0)
    whole_part = text.re_extract(r"^[^.]*", 0)
    # the zeros (and thousands separators among them) that end the integer part's digits: "10,000$" -> "0,000"
    zeros = whole_part.re_extract(r"([0,]*)[^0-9,]*$", 1).replace(",", "").length()
    tens = ibis.ifelse(whole_part.re_search("[1-9]"), TENS - ibis.least(zeros, TENS), ZERO)
    place = ibis.ifelse(digits > 0, TENS + ibis.least(digits, ZERO - 1 - TENS), tens)
    return ibis.ifelse(number & ~text.contains("e") & ~text.contains("E"), place, ibis.null("int64"))


def text_grain(reads: dict):
    """The GRAINS index of a text value that reads as an ISO, a year-first or a slashed moment (``moment_grain`` of
    the moment ``read_text`` read), NULL for every other row: the moments' slots of the decimals histogram."""
    from privsynth.engine.values import moment_grain

    return moment_grain(reads["iso"].coalesce(reads["year_first_time"]).coalesce(reads["slash_time"]))
