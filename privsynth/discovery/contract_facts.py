"""The facts one domain test states, whatever contract it is written in (dbt, GX, Frictionless, a CHECK).

The four domain tests, by their GX names: in set (categories), between (bounds), not null, of type.
A KNOWN test that is malformed (a value list that is not a list, a range with min > max, no range at
all) is refused, naming the file and the entry; a test restricted to some rows (GX ``row_condition``)
states nothing about the whole column and gives no fact. Contract values are public: errors may
quote them, never a value of the rows (none is read).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from privsynth.discovery.public import PublicColumn, PublicFacts, merge_column
from privsynth.errors import ContractError

# The domain tests this module reads, by their GX names (dbt_expectations uses the same ones).
IN_SET = "expect_column_values_to_be_in_set"
BETWEEN = "expect_column_values_to_be_between"
NOT_NULL = "expect_column_values_to_not_be_null"
OF_TYPE = "expect_column_values_to_be_of_type"
IN_TYPE_LIST = "expect_column_values_to_be_in_type_list"
DOMAIN_EXPECTATIONS = (IN_SET, BETWEEN, NOT_NULL, OF_TYPE, IN_TYPE_LIST)

# dbt's own tests and dbt_utils' range, as the GX expectation they state
DBT_TESTS = {"accepted_values": IN_SET, "not_null": NOT_NULL, "dbt_utils.accepted_range": BETWEEN,
             **{f"dbt_expectations.{name}": name for name in DOMAIN_EXPECTATIONS}}

_INTEGER = {"int", "integer", "int1", "int2", "int4", "int8", "int16", "int32", "int64", "smallint", "bigint",
            "tinyint", "hugeint", "uhugeint", "ubigint", "uinteger", "usmallint", "utinyint", "uint8", "uint16",
            "uint32", "uint64", "serial", "bigserial", "smallserial", "long", "short", "byte"}
_FLOAT = {"float", "float2", "float4", "float8", "float16", "float32", "float64", "real", "double",
          "double precision", "numeric", "decimal", "number", "bignumeric"}
_TEXT = {"text", "varchar", "character varying", "char", "character", "string", "str", "nvarchar", "nchar",
         "bpchar", "citext", "enum"}
_DATE = {"date", "date32"}
_TIMESTAMP = {"timestamp", "timestamptz", "datetime", "datetime64", "timestamp with time zone",
              "timestamp without time zone", "timestamp_ntz", "timestamp_tz", "timestamp_ltz", "timestamp_s",
              "timestamp_ms", "timestamp_ns", "timestamp_us"}
_KINDS = ((_INTEGER, "integer"), (_FLOAT, "float"), (_TEXT, "categorical"), ({"bool", "boolean"}, "boolean"),
          (_DATE, "date"), (_TIMESTAMP, "timestamp"))


@dataclass(frozen=True)
class Where:
    """Where facts are stated: the kind of contract and the file as the user named it."""

    kind: str  # "dbt", "GX", "Frictionless", "database catalogue"
    path: str

    def origin(self, what: str) -> str:
        """The origin written beside a fact in the drafted schema (``dbt models/schema.yml accepted_values``)."""
        return f"{self.kind} {self.path} {what}"

    def error(self, entry: str, problem: str) -> ContractError:
        return ContractError(f"{self.kind} {self.path}: {entry}: {problem}")


def type_kind(declared: str) -> str | None:
    """The privsynth type of a declared SQL, numpy or pandas type name (None: no privsynth type, no fact)."""
    text = str(declared).strip().lower()
    if text.endswith("[]") or text.startswith(("array", "list", "struct", "map")):
        return None
    text = re.sub(r"\s+", " ", re.sub(r"[(\[].*?[)\]]", "", text)).strip()  # length, precision, unit, zone
    if text.endswith("dtype"):  # pandas extension dtype class names (Int64Dtype)
        text = text.removesuffix("dtype")
    return next((kind for names, kind in _KINDS if text in names), None)


def category_text(value: Any, where: Where, entry: str) -> str:
    """An accepted value as the category text privsynth compares (numbers as their text: "1", "2.5")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise where.error(entry, f"accepted value {value!r} is not finite")
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise where.error(entry, f"accepted value {value!r} is not a value (expected text or a number)")


_SQL_LITERAL = re.compile(r"^\s*(?:cast\s*\(\s*)?'(.*?)'(?:\s*as\s+[\w\s]+\))?(?:\s*::\s*[\w\s]+)?\s*$", re.I | re.S)


def bound_value(value: Any, where: Where, entry: str) -> float | str:
    """A range end as a number or ISO text; dbt writes dates as SQL literals (``"'2020-01-01'"``,
    ``"cast('2020-01-01' as date)"``), which are unwrapped."""
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise where.error(entry, f"range end {value!r} is not a number or an ISO date")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise where.error(entry, f"range end {value!r} is not finite")
        return value
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep="T")
    if isinstance(value, _dt.date):
        return value.isoformat()
    text = str(value)
    literal = _SQL_LITERAL.match(text)
    text = literal.group(1) if literal else text.strip()
    try:
        number = float(text)
    except ValueError:
        try:
            _dt.datetime.fromisoformat(text)
        except ValueError:
            raise where.error(entry, f"range end {value!r} is not a number or an ISO date") from None
        return text
    return int(number) if number.is_integer() and re.fullmatch(r"[+-]?\d+", text) else number


def checked_range(low: Any, high: Any, where: Where, entry: str, strict: tuple[bool, bool] = (False, False)
                  ) -> tuple[float | str | None, float | str | None]:
    """(low, high) of a range test: at least one end, both of one kind, low <= high. A strict end of an
    integer range moves by one (x > 3 is x >= 4); a strict float or date end is kept (a closed bound
    that holds the same values but one)."""
    if low is None and high is None:
        raise where.error(entry, "a range needs min_value or max_value")
    lo = None if low is None else bound_value(low, where, entry)
    hi = None if high is None else bound_value(high, where, entry)
    if strict[0] and isinstance(lo, int):
        lo += 1
    if strict[1] and isinstance(hi, int):
        hi -= 1
    if lo is not None and hi is not None:
        if isinstance(lo, str) != isinstance(hi, str):
            raise where.error(entry, f"range [{low!r}, {high!r}] mixes a number and a date")
        if lo > hi:  # type: ignore[operator]
            raise where.error(entry, f"range min {low!r} > max {high!r}")
    return lo, hi


def _stated(value: Any) -> bool:
    """A literal value (GX suite parameters, ``{"$PARAMETER": ...}``, state nothing until a run)."""
    return not (isinstance(value, dict) and "$PARAMETER" in value)


def domain_fact(test: str, column: str, args: Mapping[str, Any], where: Where, entry: str,
                label: str) -> PublicColumn | None:
    """The fact one domain test states about ``column`` (None: it states none). ``test`` is a GX name
    (``DOMAIN_EXPECTATIONS``); ``args`` use GX's or dbt_expectations' spellings."""
    if args.get("row_condition") or not all(_stated(v) for v in args.values()):
        return None
    origin = where.origin(label)
    mostly = args.get("mostly", 1)
    if test == NOT_NULL:
        # a not-null test that tolerates some nulls (mostly < 1) does not say the column has none
        return PublicColumn(column, nullable=False, origins={"nullable": origin}) if mostly in (1, None) else None
    if test == IN_SET:
        values = args.get("value_set", args.get("values"))
        if not isinstance(values, list) or not values:
            raise where.error(entry, f"the accepted values must be a non-empty list, got {values!r}")
        present = [v for v in values if v is not None]  # a null among them says nulls are allowed, nothing more
        if present and all(isinstance(v, bool) or v in (0, 1, "true", "false", "True", "False", "TRUE", "FALSE", "1",
                                                        "0")
                           for v in present) and any(isinstance(v, bool) for v in present):
            return PublicColumn(column, type="boolean", origins={"type": origin})
        cats = tuple(dict.fromkeys(category_text(v, where, entry) for v in present))
        return PublicColumn(column, categories=cats, origins={"categories": origin}) if cats else None
    if test == BETWEEN:
        strict = (bool(args.get("strict_min")), bool(args.get("strict_max")))
        if args.get("inclusive") is False:  # dbt_utils.accepted_range
            strict = (True, True)
        bounds = checked_range(args.get("min_value"), args.get("max_value"), where, entry, strict)
        return PublicColumn(column, bounds=bounds, origins={"bounds": origin})
    names = [args.get("type_", args.get("column_type"))] if test == OF_TYPE else \
        args.get("type_list", args.get("column_type_list"))
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise where.error(entry, f"expected a type name (or a list of them), got {names!r}")
    kinds = {type_kind(n) for n in names}
    # a list spanning several privsynth types (ints and floats) states no one type
    return (PublicColumn(column, type=kinds.pop(), origins={"type": origin})
            if len(kinds) == 1 and None not in kinds else None)


def combined(facts: Iterable[PublicColumn], where: Where) -> PublicFacts:
    """One source's facts per column. Its range tests all hold, so their ranges INTERSECT (a min from one
    test, a max from another); other facts stated twice must agree (``merge_column``)."""
    by_name: dict[str, list[PublicColumn]] = {}
    for fact in facts:
        by_name.setdefault(fact.name, []).append(fact)
    out: dict[str, PublicColumn] = {}
    for name, group in by_name.items():
        ranged = [f for f in group if f.bounds is not None]
        merged = PublicColumn(name)
        for fact in [f for f in group if f.bounds is None] + ([_intersection(name, ranged, where)] if ranged else []):
            merged = merge_column(merged, fact)
        out[name] = merged
    return PublicFacts(out)


def _intersection(name: str, ranged: list[PublicColumn], where: Where) -> PublicColumn:
    lows = [(f.bounds[0], f.origin("bounds"), f.derived.get("bounds")) for f in ranged if f.bounds[0] is not None]  # type: ignore[index]
    highs = [(f.bounds[1], f.origin("bounds"), f.derived.get("bounds")) for f in ranged if f.bounds[1] is not None]  # type: ignore[index]
    try:
        low = max(lows, key=lambda x: x[0]) if lows else (None, None, None)
        high = min(highs, key=lambda x: x[0]) if highs else (None, None, None)
        empty = low[0] is not None and high[0] is not None and low[0] > high[0]
    except TypeError:
        raise where.error(f"column {name!r}", "its ranges mix numbers and dates") from None
    if empty:
        raise where.error(f"column {name!r}", f"its ranges do not overlap: min {low[0]!r} ({low[1]}) > max "
                                              f"{high[0]!r} ({high[1]})")
    origins = list(dict.fromkeys(o for o in (low[1], high[1]) if o))
    whys = list(dict.fromkeys(w for w in (low[2], high[2]) if w))  # an end from a data-derived entry stays so
    return PublicColumn(name, bounds=(low[0], high[0]), origins={"bounds": "; ".join(origins)},
                        derived={"bounds": "; ".join(whys)} if whys else {})
