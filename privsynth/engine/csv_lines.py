"""CSV read as one line, one record (docs/design.md 5.9): no line can change how another line reads.

A CSV reader that follows quotes across lines lets one record decide the others: an unterminated quote
swallows every line after it (up to the next quote), a record with another line ending or a stray
field changes what a sniffer decides for the whole file, and a strict reader fails the whole run on it.
Any of these makes D and D plus one record end differently, or differ by many records: a one-record
test outside the DP accounting.

So a CSV source is read here as physical lines (``\\n``, ``\\r\\n`` or ``\\r``), with a fixed dialect and no
sniffing, and each line is split on its own: RFC 4180 fields (``"..."`` with ``""`` for a quote) that must
cover the whole line, exactly as many as the header has. A line that is not such a record (an
unbalanced quote, a quoted value holding a line break, too many or too few fields, invalid UTF-8, longer
than ``MAX_LINE_BYTES``, blank) is dropped: a per-line map, so the neighbouring relation on lines is
kept (one line added changes at most one record). What the file's STRUCTURE says (its header) may still
refuse the run, before any charge.

The query is DuckDB SQL over DuckDB's own line reader (CSV is read by DuckDB, in place, in parallel);
lines without a quote take the fast path (a plain split).
"""

from __future__ import annotations

import re

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is dropped (DuckDB reads it as an error line and skips it)
RECORD_SEPARATOR = "\x1e"  # the line reader's column delimiter: a line holding it is read up to it


def _literal(text: str) -> str:
    """A DuckDB string literal (quotes doubled; no escapes are interpreted in standard strings)."""
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def field_pattern(delimiter: str) -> str:
    """One RFC 4180 field: a quoted value ("" inside for a quote), or text without quotes or delimiters."""
    d = re.escape(delimiter)
    return f'(?:"(?:[^"]|"")*"|[^{d}"]*)'


def line_reader(location: str, skip: int) -> str:
    """DuckDB's CSV reader turned into a reader of physical lines: no quotes, no sniffing, errors skipped."""
    return (f"read_csv({_literal(location)}, columns={{'line': 'VARCHAR'}}, delim=chr(30), quote='', escape='', "
            f"header=false, auto_detect=false, strict_mode=false, ignore_errors=true, skip={skip}, "
            f"max_line_size={MAX_LINE_BYTES})")


def records_query(location: str, names: list[str], delimiter: str) -> str:
    """A SELECT of the file's records as text columns ``names`` (the header's), one line one record."""
    d = _literal(delimiter)
    field = field_pattern(delimiter)
    whole = f"^{field}(?:{re.escape(delimiter)}{field})*$"
    split = (f"CASE WHEN contains(line, '\"') THEN regexp_extract_all({d} || line, "
             f"{_literal(re.escape(delimiter) + '(' + field + ')')}, 1) ELSE string_split(line, {d}) END")
    columns = ", ".join(
        f"CASE WHEN starts_with(f[{i + 1}], '\"') THEN replace(f[{i + 1}][2:-2], '\"\"', '\"') ELSE f[{i + 1}] END "
        f"AS {_identifier(name)}" for i, name in enumerate(names))
    return (f"SELECT {columns} FROM (SELECT {split} AS f FROM {line_reader(location, 1)} "
            f"WHERE NOT contains(line, '\"') OR regexp_full_match(line, {_literal(whole)})) "
            f"WHERE len(f) = {len(names)}")


def first_line_query(location: str) -> str:
    """The file's first physical line (its header), read as the records are."""
    return f"SELECT line FROM {line_reader(location, 0)} LIMIT 1"
