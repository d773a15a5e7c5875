"""Dataset schemas: public metadata about a table's columns.

A schema states each column's type and its *public* domain (categories, numeric bounds and bin
edges, nullability) and which columns to drop. It is written from documentation, never computed
from the private rows: data-dependent bins, bounds or category lists leak privacy (docs/design.md section 3).
A table without documentation gets its schema drafted under DP (``privsynth schema draft --epsilon``, or a run
without a schema).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from privsynth.errors import SchemaError  # noqa: F401  (re-exported: raised here)
from privsynth.schema import stored, temporal
from privsynth.schema.determined import DETERMINABLE, DeterminedBy, check_determinations, number_label

ColumnType = Literal["categorical", "integer", "float", "boolean", "date", "timestamp"]
MISSING_LABEL = "<missing>"
OUT_OF_DOMAIN_LABEL = "<out-of-domain>"


class Column(BaseModel):
    """One column's public domain.

    Numeric columns (integer, float) are discretised by ``bins``: ascending edges e_0 < ... < e_k with
    e_0 = bounds[0] and e_k = bounds[1]; bin i is [e_i, e_{i+1}), the last bin also holds e_k.
    ``on_out_of_domain`` says what a value outside the public domain does: ``fail`` validation,
    become the explicit out-of-domain ``category`` (categorical columns), or ``clip`` to the bounds
    (numeric columns).

    Date and timestamp columns are numeric in a fixed unit (``privsynth.schema.temporal``: days since
    1970-01-01, or whole seconds since the epoch, UTC). Their ``bounds`` and ``bins`` are written as ISO
    dates/timestamps (held as numbers in the unit), or ``bin_by`` (year, quarter, month, week, day)
    generates the edges from the bounds: the calendar boundaries strictly inside them (data-free).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    type: ColumnType
    categories: tuple[str, ...] | None = None
    bounds: tuple[float, float] | None = None
    bins: tuple[float, ...] | None = None
    nullable: bool = False
    drop: bool = False
    on_out_of_domain: Literal["fail", "category", "clip"] = "fail"
    # float columns: decimal places of synthetic values (2 for money in cents); None keeps full precision.
    # integer columns: a negative place, as SQL's ROUND(x, -1) has it (-1: whole tens, -3: thousands)
    precision: int | None = Field(default=None, ge=-9, le=12)
    # timestamp columns: the grain synthetic moments are whole in (hourly readings: hour); None: whole seconds
    resolution: Literal["day", "hour", "minute"] | None = None
    # date/timestamp columns: bins at calendar boundaries instead of explicit edges
    bin_by: Literal["year", "quarter", "month", "week", "day"] | None = None
    # which parts of this column's domain a DP draft released (``privsynth schema draft --epsilon``):
    # any of categories, bounds, bins; empty: all public. Drafted categories are the frequent values by
    # construction, so the mostly-in-domain rule (written for public lists) does not apply to them.
    dp_released: tuple[Literal["categories", "bounds", "bins", "values", "type"], ...] = ()
    # numeric columns: a coded column holds only these values (survey answers 1-5, income brackets 1-12,
    # 0/1 flags): one level per value, bins generated from them, and synthetic values are exactly these
    values: tuple[float, ...] | None = None
    # numeric and temporal columns: a value that cannot be read as the column's type (text in a number
    # column, a fraction in an integer column) fails validation, or counts as missing (nullable columns)
    on_unreadable: Literal["fail", "missing"] = "fail"
    # numeric, date and timestamp columns: the written form of their values in the source, read in it and written
    # back in it (engine/values.py): plain ("98117": numbers a typed source stores as strings), thousands
    # ("1,234.50"), currency ("$9"), percent ("12%"); dates %m/%d/%Y, %d/%m/%Y, %d.%m.%Y, %Y/%m/%d; moments
    # %Y/%m/%d %H:%M:%S, %m/%d/%Y %H:%M:%S, %d/%m/%Y %H:%M:%S; ISO text a typed source stores as strings,
    # %Y-%m-%d, %Y-%m-%dT%H:%M:%S, %Y-%m-%dT%H:%M:%SZ (UTC marked with a Z), %Y-%m-%d %H:%M:%S (SQL's text of a
    # moment) and either with a zone offset (written in UTC: +00:00). None: numbers, dates and moments (or the
    # source's own typed values)
    format: Literal["plain", "thousands", "currency", "percent", "%m/%d/%Y", "%d/%m/%Y", "%d.%m.%Y", "%Y/%m/%d",
                    "%Y/%m/%d %H:%M:%S", "%m/%d/%Y %H:%M:%S", "%d/%m/%Y %H:%M:%S", "%Y-%m-%d",
                    "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S+00:00",
                    "%Y-%m-%d %H:%M:%S+00:00"] | None = None
    # this column is a stated function of another (``schema.determined``): public structural zeros
    determined_by: DeterminedBy | None = None
    # integer and float columns: the share of the values whole in each decimal place, coarsest first: multiples of
    # 1000, 100, 10, whole numbers, then 1 .. precision decimals (a DP fact of discovery's places histogram;
    # schema.grid): values are drawn on the precision grid by them. None: uniformly on the grid
    place_shares: tuple[float, ...] | None = None
    # numeric and temporal columns: the source's storage type, which the synthetic table keeps (schema.stored):
    # decimal(12,2), uint8, float32, timestamp(us, UTC), ...; None: int64, float64, date32, timestamp(us)
    stored_as: str | None = None
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _coded_edges(cls, data: object) -> object:
        """A coded column's bounds and bins from its ``values``: one bin [v_i, v_{i+1}) per value, the last
        [v_k, v_k + step] (step 1 for integers, else the last gap), so each value is its own level."""
        if not isinstance(data, dict) or data.get("values") is None or data.get("drop"):
            return data
        where = f"column {data.get('name')!r}"
        try:
            values = tuple(float(v) for v in data["values"])
        except (TypeError, ValueError):
            raise ValueError(f"{where}: 'values' must be a list of numbers") from None
        if not values or any(not math.isfinite(v) for v in values) or any(b <= a for a, b in zip(values, values[1:])):
            raise ValueError(f"{where}: 'values' must be finite numbers in strictly increasing order")
        if data.get("type") not in ("integer", "float"):
            raise ValueError(f"{where}: 'values' applies to integer and float columns")
        step = 1.0 if data.get("type") == "integer" or len(values) == 1 else values[-1] - values[-2]
        top = values[-1] + step  # past 2^53 a step of 1 may not move a double (a column of 1e300): the next double
        edges = (*values, top if top > values[-1] else math.nextafter(values[-1], math.inf))
        out = dict(data, values=values)
        for key, generated in (("bins", edges), ("bounds", (edges[0], edges[-1]))):
            given = out.get(key)
            if given is None:
                out[key] = generated
            elif tuple(float(x) for x in given) != generated:
                raise ValueError(f"{where}: give 'values' alone; its {key} are generated from it ({list(generated)})")
        return out

    @model_validator(mode="before")
    @classmethod
    def _temporal_edges(cls, data: object) -> object:
        """Date/timestamp bounds and bins from ISO text (or YAML dates) to the unit; ``bin_by`` edges."""
        if not isinstance(data, dict) or data.get("type") not in temporal.TEMPORAL_TYPES or data.get("drop"):
            return data
        kind, where = data["type"], f"column {data.get('name')!r}"
        out = dict(data)
        try:
            for key in ("bounds", "bins"):
                if isinstance(out.get(key), (list, tuple)):
                    out[key] = tuple(temporal.to_unit(v, kind) for v in out[key])
            bounds, unit = out.get("bounds"), out.get("bin_by")
            if unit is not None and isinstance(bounds, tuple) and len(bounds) == 2 and bounds[0] < bounds[1]:
                generated = temporal.generated_edges(bounds[0], bounds[1], unit, kind)
                if out.get("bins") is None:
                    out["bins"] = generated
                elif tuple(out["bins"]) != generated:  # both given (a dumped schema): they must agree
                    raise ValueError(f"give either 'bins' or 'bin_by', not both (bins differ from bin_by {unit!r})")
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        return out

    @model_validator(mode="after")
    def _check(self) -> Column:
        where = f"column {self.name!r}"
        if self.drop:
            return self
        if self.type == "categorical":
            if self.categories is None or (not self.categories and self.on_out_of_domain != "category"):
                # Empty only where every value is <out-of-domain>: a column whose DP categories the budget could
                # not find keeps its missing and present shares rather than being dropped.
                raise ValueError(f"{where}: a categorical column needs a non-empty 'categories' list (an empty "
                                 "one only with on_out_of_domain: category)")
            # the one text rule: blanks around a category are not part of it ("MA" and "MA " are one category)
            read = [c.strip() for c in self.categories]
            if len(set(read)) != len(read) or "" in read:
                dupes = sorted({c for c in read if read.count(c) > 1 or not c})
                raise ValueError(f"{where}: categories repeat {dupes} (blanks around a category are not part of it; "
                                 "a blank category is a missing value)")
            if MISSING_LABEL in self.categories or OUT_OF_DOMAIN_LABEL in self.categories:
                raise ValueError(f"{where}: {MISSING_LABEL!r} and {OUT_OF_DOMAIN_LABEL!r} are reserved labels")
            if self.bounds is not None or self.bins is not None:
                raise ValueError(f"{where}: a categorical column takes 'categories', not 'bounds' or 'bins'")
            if self.on_out_of_domain == "clip":
                raise ValueError(f"{where}: on_out_of_domain 'clip' applies to numeric columns; use 'fail' or "
                                 "'category'")
        elif self.type == "boolean":
            if self.categories is not None or self.bounds is not None or self.bins is not None:
                raise ValueError(f"{where}: a boolean column takes no categories, bounds or bins")
            if self.on_out_of_domain == "clip":
                raise ValueError(f"{where}: on_out_of_domain 'clip' applies to numeric columns")
        else:
            if self.categories is not None:
                raise ValueError(f"{where}: {_article(self.type)} {self.type} column takes 'bounds' and 'bins', not "
                                 "'categories'")
            edges_field = "'bins' edges or 'bin_by'" if self.type in temporal.TEMPORAL_TYPES else "'bins' edges"
            if self.bounds is None:
                raise ValueError(f"{where}: {_article(self.type)} {self.type} column needs public 'bounds' [low, high] "
                                 f"and {edges_field}")
            low, high = self.bounds
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"{where}: bounds must be finite with low < high, got {list(self.bounds)}")
            if self.bins is None:
                raise ValueError(f"{where}: {_article(self.type)} {self.type} column needs public 'bounds' [low, high] "
                                 f"and {edges_field}")
            edges = self.bins
            if len(edges) < 2:
                raise ValueError(f"{where}: bins needs at least two edges")
            if any(not math.isfinite(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
                raise ValueError(f"{where}: bin edges must be finite and strictly increasing, got {list(edges)}")
            if edges[0] != low or edges[-1] != high:
                raise ValueError(f"{where}: the first and last bin edges must equal the bounds {list(self.bounds)}, "
                                 f"got {edges[0]} and {edges[-1]}")
            if self.type in ("integer", "date", "timestamp") and any(float(e) != int(e) for e in edges):
                unit = {"integer": "integer", "date": "whole-day", "timestamp": "whole-second"}[self.type]
                raise ValueError(f"{where}: {_article(self.type)} {self.type} column needs {unit} bin edges")
            if self.on_out_of_domain == "category":
                raise ValueError(f"{where}: numeric out-of-domain values can 'fail' or 'clip', not become a category")
        if self.bin_by is not None and self.type not in temporal.TEMPORAL_TYPES:
            raise ValueError(f"{where}: 'bin_by' applies to date and timestamp columns")
        if self.place_shares is not None:
            places = 4 + (self.precision or 0)
            if self.type not in ("integer", "float") or (self.type == "float" and self.precision is None):
                raise ValueError(f"{where}: place_shares applies to integer columns and to float columns with a "
                                 "precision")
            if len(self.place_shares) != places or any(not (math.isfinite(x) and x >= 0) for x in self.place_shares) \
                    or sum(self.place_shares) <= 0:
                raise ValueError(f"{where}: place_shares must be {places} non-negative shares (multiples of 1000, 100, "
                                 "10, whole, then each decimal up to the precision) with a positive sum")
        if self.stored_as is not None:
            if not stored.fits(self.type, self.stored_as):  # parse_form's ValueError names the forms expected
                raise ValueError(f"{where}: stored_as {self.stored_as!r} cannot hold {_article(self.type)} "
                                 f"{self.type} column's values")
            if self.format is not None:
                raise ValueError(f"{where}: a column with a written 'format' is stored as text; give one of "
                                 "format and stored_as")
        if self.on_unreadable == "missing" and not self.nullable:
            raise ValueError(f"{where}: on_unreadable 'missing' needs nullable: true")
        if self.on_unreadable == "missing" and self.type in ("categorical", "boolean"):
            raise ValueError(f"{where}: on_unreadable applies to numeric and temporal columns")
        if self.format is not None and self.type not in format_types(self.format):
            raise ValueError(f"{where}: format {self.format!r} applies to "
                             f"{' and '.join(format_types(self.format))} columns")
        if self.precision is not None and not (self.type == "float" and self.precision >= 0
                                               or self.type == "integer" and self.precision < 0):
            raise ValueError(f"{where}: 'precision' applies to float columns (decimals, 0 or more) and to integer "
                             "columns (a negative place: -1 for whole tens, -2 hundreds)")
        if self.resolution is not None and self.type != "timestamp":
            raise ValueError(f"{where}: 'resolution' applies to timestamp columns (a date is a whole day already)")
        if self.determined_by is not None and self.type not in DETERMINABLE:
            raise ValueError(f"{where}: 'determined_by' applies to {', '.join(DETERMINABLE)} columns")
        return self

    @property
    def labels(self) -> tuple[str, ...]:
        """Level labels in code order: domain levels, then missing, then out-of-domain."""
        if self.type == "categorical":
            levels = list(self.categories or ())
        elif self.type == "boolean":
            levels = ["false", "true"]
        elif self.values is not None:
            levels = [number_label(v) for v in self.values]
        else:
            edges = self.bins or ()
            fmt = (lambda x: temporal.format_unit(x, self.type)) if self.type in temporal.TEMPORAL_TYPES \
                else number_label
            levels = [f"[{fmt(a)}, {fmt(b)}{']' if i == len(edges) - 2 else ')'}" for i,
                      (a, b) in enumerate(zip(edges, edges[1:]))]
        if self.nullable:
            levels.append(MISSING_LABEL)
        if self.on_out_of_domain == "category":
            levels.append(OUT_OF_DOMAIN_LABEL)
        return tuple(levels)

    @property
    def domain_levels(self) -> int:
        """Number of in-domain levels (categories, 2 for boolean, or bins)."""
        if self.type == "categorical":
            return len(self.categories or ())
        if self.type == "boolean":
            return 2
        return len(self.bins or ()) - 1


def format_types(form: str) -> tuple[str, ...]:
    """The column types a written form applies to: a moment's (with a time of day), a date's, or numbers'."""
    if "%H" in form:
        return ("timestamp",)
    return ("date",) if "%" in form else ("integer", "float")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


class Schema(BaseModel):
    """A table's public schema; columns keep file order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    source: str = ""
    # "fail": the input must have exactly these columns; "ignore": a source column the schema does not
    # list is never read (a wide warehouse table synthesised on a few columns, no hand-written query).
    other_columns: Literal["fail", "ignore"] = "fail"
    columns: tuple[Column, ...]

    @model_validator(mode="after")
    def _check(self) -> Schema:
        names = [c.name for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"column names repeat: {dupes}")
        if not self.kept_columns:
            raise ValueError("every column is dropped; a schema needs at least one kept column")
        check_determinations(self.columns)
        return self

    @property
    def kept_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.drop)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"schema {self.name!r} has no column {name!r}")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Schema:
        """Read and validate a YAML schema file (``load_schema``)."""
        return load_schema(path)

    def content_hash(self) -> str:
        """sha256 of the canonical JSON form: the schema's identity in manifests and release keys."""
        # a storage type left unsaid is no part of the identity: schemas written before it keep theirs
        canonical = json.dumps(_without_unsaid(self.model_dump(mode="json")), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


UNSAID = ("stored_as", "place_shares")  # fields a schema written before them leaves out of its identity


def _without_unsaid(dumped: dict) -> dict:
    columns = [{k: v for k, v in c.items() if not (k in UNSAID and v is None)} for c in dumped["columns"]]
    return dict(dumped, columns=columns)


def _format_validation_error(err: ValidationError, raw: dict) -> str:
    lines = []
    columns = raw.get("columns") if isinstance(raw, dict) else None
    for e in err.errors():
        loc = list(e["loc"])
        where = "schema"
        if len(loc) >= 2 and loc[0] == "columns" and isinstance(loc[1], int):
            col = columns[loc[1]] if isinstance(columns, list) and loc[1] < len(columns) else {}
            name = col.get("name", f"#{loc[1]}") if isinstance(col, dict) else f"#{loc[1]}"
            where = f"column {name!r}" + (f" field {'.'.join(map(str, loc[2:]))!r}" if len(loc) > 2 else "")
        elif loc:
            where = f"field {'.'.join(map(str, loc))!r}"
        msg = e["msg"].removeprefix("Value error, ")
        # Column validators already name their column; do not say it twice.
        lines.append(msg if msg.startswith(f"{where}: ") else f"{where}: {msg}")
    return "; ".join(lines)


def parse_schema(raw: object, origin: str = "<schema>") -> Schema:
    """Validate a mapping as a Schema, with errors that name the column and the problem."""
    if not isinstance(raw, dict):
        raise SchemaError(f"{origin}: a schema must be a mapping with 'name' and 'columns', got {type(raw).__name__}")
    try:
        return Schema.model_validate(raw)
    except ValidationError as err:
        raise SchemaError(f"{origin}: {_format_validation_error(err, raw)}") from None


def load_schema(path: str | Path) -> Schema:
    """Read and validate a YAML schema file."""
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"schema file {str(path)!r} does not exist")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SchemaError(f"{path}: not valid YAML: {err}") from None
    return parse_schema(raw, origin=str(path))


