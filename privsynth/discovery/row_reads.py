"""How each row of a column is read for its DP facts (``facts.exact_counts``): the class it falls in (CLASSES, one per
row: missing, a whole or a fractional number, an ISO date or moment, a number or a date in a written form, other
text) and its slot of the PLACES histogram (a number's place, a moment's grain). Total ibis expressions: any text,
a hostile value included, reads as a class, never as an error (``engine.values`` holds the forms themselves). A
missing word ("N/A", "nan": ``engine.values.missing_word``) is in the missing class, as every later read of a
column of numbers or moments reads it.
"""

from __future__ import annotations

from privsynth.discovery.forms import TENS, ZERO, ZULU

# "timestamp": an ISO moment written with a T (a Z after it or not: ``text_grain`` tells them apart); "iso_space",
# "iso_offset" and "iso_space_offset": one written with a space ("2021-05-07 03:05:20", SQL's text of a moment), a
# zone offset ("2021-05-07T03:05:20-04:00"), or both
CLASSES = ("missing", "whole", "fraction", "date", "timestamp", "text",
           "thousands", "currency", "percent", "month_first", "day_first", "slash", "dot", "year_first",
           "year_first_time", "iso_space", "iso_offset", "iso_space_offset")
DATE_FORMAT_CLASSES = ("month_first", "day_first", "slash", "dot", "year_first", "year_first_time", "iso_space",
                       "iso_offset", "iso_space_offset")


def slashed_moment_parts(text) -> dict:
    """Whether a (cleaned) text value is a slashed moment with a valid time of day ("9/30/1990 0:00:00"), and its
    date part ("9/30/1990"; the text itself otherwise): ``read_text``'s inputs, projected once by the facts query
    so that the date readers, which name their input several times each, do not repeat the regular expressions."""
    import ibis

    from privsynth.engine.values import TIME_OF_DAY, VALID_SLASH_MOMENT

    slashed = text.re_search(VALID_SLASH_MOMENT)
    return {"slashed": slashed, "dated": ibis.ifelse(slashed, text.re_replace(TIME_OF_DAY, ""), text)}


def read_text(text, parts: dict | None = None) -> dict:
    """What a (cleaned) text value reads as, each test once: the per-row columns ``row_class`` and
    ``decimals_bin`` take (a projection: the backend evaluates each regular expression once per row). ``parts``:
    ``slashed_moment_parts`` of the text, projected (computed here when not given)."""
    import ibis

    from privsynth.engine.values import NUMBER_FORMATS, missing_word, moment_from_text, number_from_text

    # "iso" and "year_first_time" are the moments read (NULL: none), each parsed once; the others are tests. A
    # slashed moment ("9/30/1990 0:00:00", a valid time of day) counts in the slashed classes by its date, read as
    # a slashed date is, and in the grain slots by its time's text ("slash_grain"): two more parses of every text
    # value made a 17-column text table's facts query 50% slower.
    parts = parts or slashed_moment_parts(text)
    slashed, dated = parts["slashed"], parts["dated"]
    month_first = moment_from_text(dated, "%m/%d/%Y").notnull()
    day_first = moment_from_text(dated, "%d/%m/%Y").notnull()
    reads = {"text": text, "missing_word": missing_word(text), "number": number_from_text(text),
             "iso": moment_from_text(text),
             "month_first": month_first, "day_first": day_first,
             "dot": moment_from_text(text, "%d.%m.%Y").notnull(),
             "year_first": moment_from_text(text, "%Y/%m/%d").notnull(),
             # a moment, not a test: row_class tests it, and text_grain reads its grain
             "year_first_time": moment_from_text(text, "%Y/%m/%d %H:%M:%S"),
             "slash_grain": ibis.ifelse(slashed & (month_first | day_first), _time_grain(text), ibis.null("int64"))}
    reads.update({f: number_from_text(text, f).notnull() for f in NUMBER_FORMATS})
    return reads


def _time_grain(text):
    """The GRAINS index of the time of day that ends ``text`` (a valid one), read off its digits with one regular
    expression and plain string tests: midnight a day, 05:00 an hour, 05:30 a minute, 05:30:07 a second."""
    import ibis

    time = text.re_extract(r"[T ]([0-9]{1,2}:[0-9]{2}(:[0-9]{2})?)$", 1)
    whole_minute = (time.length() <= 5) | time.endswith(":00")
    return ibis.cases((time.isin(["0:00", "00:00", "0:00:00", "00:00:00"]), 0),
                      (whole_minute & (time.length() <= 5).ifelse(time, time.left(time.length() - 3)).endswith(":00"),
                       1),
                      (whole_minute, 2), else_=3).cast("int64")


def row_class(reads: dict, declared: str, raw=None):
    """Per row, the index in CLASSES of a column's value (exactly one per row): from ``read_text``'s columns
    for text, from ``raw`` for a source kind ``declared`` (integer, float, boolean, date, timestamp). One CASE,
    first match wins, so the classes are exclusive by construction."""
    import ibis

    from privsynth.engine.values import ISO_OFFSET, NUMBER_FORMATS, in_calendar, is_whole

    index = {c: ibis.literal(i, type="int8") for i, c in enumerate(CLASSES)}
    if declared == "text":
        text, number = reads["text"], reads["number"]
        return ibis.cases(
            (text.isnull() | reads["missing_word"], index["missing"]),
            (is_whole(number), index["whole"]),
            (number.notnull(), index["fraction"]),
            (reads["iso"].notnull() & (text.length() <= 10), index["date"]),
            (reads["iso"].notnull() & text.re_search(ISO_OFFSET) & (text.substr(10, 1) == " "),
             index["iso_space_offset"]),
            (reads["iso"].notnull() & text.re_search(ISO_OFFSET), index["iso_offset"]),
            (reads["iso"].notnull() & (text.substr(10, 1) == " "), index["iso_space"]),
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
    read = number & ~reads["missing_word"] & ~text.contains("e") & ~text.contains("E")
    return ibis.ifelse(read, place, ibis.null("int64"))


def text_grain(reads: dict):
    """The GRAINS index of a text value that reads as an ISO, a year-first or a slashed moment (``moment_grain`` of
    the moment ``read_text`` read), ZULU more for an ISO moment that ends in a Z ("2012-01-01T06:16:41Z"), NULL for
    every other row: the moments' slots of the decimals histogram."""
    import ibis

    from privsynth.engine.values import moment_grain

    grain = moment_grain(reads["iso"].coalesce(reads["year_first_time"])).coalesce(reads["slash_grain"])
    zulu = reads["iso"].notnull() & (reads["text"].length() > 10) & reads["text"].endswith("Z")
    return grain + ibis.ifelse(zulu, ZULU, 0)
