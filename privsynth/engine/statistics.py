"""The statistics a mechanism needs, as aggregate queries that run where the data lives.

* ``row_count``: ``SELECT count(*)``;
* ``histogram``: ONE ``GROUP BY`` over every binned column; the sparse weighted histogram comes back
  (at most min(n, domain size) rows of small integer codes and a count), never the rows;
* ``marginals``: from the histogram when it is small, else one ``GROUP BY`` per marginal (sent as one
  ``UNION ALL`` query), each returning at most the marginal's cells.

PRIVATE: every result is an exact statistic of the private table. It goes to a mechanism (which adds
noise) or to the opt-in internal audit; never to a log, artifact or error message. Errors name the
column and the kind of fault (``binning.Fault``), never a value or a count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ibis
import numpy as np
import pyarrow as pa

from privsynth.engine.backends import EngineOptions, OpenedTable, backend_error, open_table
from privsynth.engine.binning import FAULT_ORDER, Binning, Fault, binning, fault_message, type_problem
from privsynth.engine.sources import check_input_width
from privsynth.io.connections import InputError
from privsynth.schema import Schema
from privsynth.schema.encoding import Domain, domain_of
from privsynth.schema.workload import Histogram, Marginal

COUNT = "privsynth_count"
MARGINAL_ID = "privsynth_marginal"
FAULT_SHIFT = 5  # fault codes are -5..-1: shifted by 5, every code packs as a digit >= 0
# Use the histogram for marginals when it has at most this many rows (min(n, domain size) bounds it).
DEFAULT_MAX_HISTOGRAM_ROWS = 2_000_000


@dataclass
class Source:
    """A table opened for counting, with the schema's binning expressions built once.

    Create it with :func:`open_source`; close it (or use ``with``) to release the connection.
    ``bytes_returned`` adds up the Arrow size of every result that came back from the backend:
    the engine's whole traffic from the data to this process.
    """

    opened: OpenedTable
    schema: Schema
    bins: Binning
    domain: Domain
    max_histogram_rows: int = DEFAULT_MAX_HISTOGRAM_ROWS
    packed_max_cells: int = 2**62  # pack the codes into one BIGINT key below this many packed cells
    bytes_returned: int = 0
    # Drop every record holding a value the schema forbids (a fault code) instead of refusing the table: a
    # per-record map (a record is kept or dropped on its own values), so a DP release of the counts stays DP,
    # and whether a release exists no longer depends on an exact check (a budgeted dataset's runs).
    drop_faulty_records: bool = False
    _histogram: Histogram | None = None

    # ------------------------------------------------------------ plumbing

    def describe(self) -> str:
        """A public description of the source: kind and location, credentials redacted."""
        return self.opened.description

    @property
    def origin(self) -> str:
        return f"input {self.describe()}"

    @property
    def table(self) -> ibis.Table:
        return self.opened.table

    def _run(self, expr) -> pa.Table:
        try:
            result = expr.to_pyarrow()
        except InputError:
            raise
        except Exception as err:  # noqa: BLE001  (backend messages can quote values: see backend_error)
            raise backend_error(err, self.origin) from None
        self.bytes_returned += result.nbytes
        return result

    def close(self) -> None:
        self.opened.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ statistics

    def row_count(self) -> int:
        """The number of rows (private)."""
        result = self._run(self.table.aggregate(**{COUNT: self.table.count()}))
        return int(result[COUNT][0].as_py())

    def _cells(self, attributes) -> int:
        """The number of cells of ``attributes`` (exact: Python integers do not overflow)."""
        return math.prod(int(self.domain.sizes[a]) for a in attributes)

    def _codes_table(self, attributes: Sequence[int]) -> ibis.Table:
        return self.bins.table.select(**{self.bins.names[a]: self.bins.codes[a] for a in attributes})

    def _raise_faults(self, codes: np.ndarray, attributes: Sequence[int]) -> None:
        if self.drop_faulty_records or not codes.size or codes.min() >= 0:
            return
        cols = self.schema.kept_columns
        for j, a in enumerate(attributes):
            present = set(np.unique(codes[:, j][codes[:, j] < 0]).tolist())
            for fault in FAULT_ORDER:
                if int(fault) in present:
                    raise InputError(f"{self.origin}: {fault_message(cols[a], fault)}")

    def histogram(self) -> Histogram:
        """The sparse weighted histogram of the level codes (one GROUP BY over all binned columns).

        Codes equal ``encoding.encode_codes`` on the pandas path's rows; rows come sorted
        lexicographically (as ``Histogram.of_codes``). Raises InputError naming the column for a value
        the schema forbids.

        When the packed domain (each attribute's levels + 5 fault codes) has fewer than 2^62 cells, the
        codes are packed on the backend into ONE BIGINT key (row-major), so the GROUP BY hashes one
        column, each code expression is computed once, and 16 bytes per distinct record come back; the
        codes are unpacked here. Larger domains group by every column.
        """
        if self._histogram is not None:
            return self._histogram
        d = self.domain.n_attributes
        if math.prod(self._packed_sizes(range(d))) < self.packed_max_cells:
            hist = self._packed_histogram()
        else:
            hist = self._wide_histogram()
        if self.drop_faulty_records:
            keep = fault_free(hist.codes)
            hist = Histogram(hist.codes[keep], hist.counts[keep])
        self._histogram = hist
        return hist

    def _wide_histogram(self) -> Histogram:
        attributes = list(range(self.domain.n_attributes))
        names = list(self.bins.names)
        expr = self._codes_table(attributes).group_by(names).aggregate(**{COUNT: ibis._.count()})
        result = self._run(expr)
        codes = np.column_stack([result[n].to_numpy(zero_copy_only=False).astype(np.int32) for n in names]) \
            if result.num_rows else np.zeros((0, len(names)), dtype=np.int32)
        counts = result[COUNT].to_numpy(zero_copy_only=False).astype(np.int64)
        del result
        self._raise_faults(codes, attributes)
        order = np.lexsort(codes.T[::-1]) if codes.shape[0] else np.zeros(0, dtype=np.int64)
        return Histogram(codes[order], counts[order])

    def _packed_histogram(self) -> Histogram:
        attributes = list(range(self.domain.n_attributes))
        result = self._run(self._packed_counts(attributes))
        keys = result["privsynth_key"].to_numpy(zero_copy_only=False).astype(np.int64)
        counts = result[COUNT].to_numpy(zero_copy_only=False).astype(np.int64)
        del result
        order = np.argsort(keys, kind="stable")  # packed keys sort as the codes do (row-major)
        keys, counts = keys[order], counts[order]
        return Histogram(self._unpack(keys, attributes), counts)

    def marginals(self, marginals: Sequence[Marginal], method: str = "auto") -> dict[Marginal, np.ndarray]:
        """Counts per cell of each marginal: flat float64 vectors in ``workload.marginal_counts`` layout.

        ``method``: ``histogram`` (derive locally from the histogram), ``query`` (one GROUP BY per
        marginal on the backend, in one UNION ALL), or ``auto``: the histogram when it is already
        computed or has at most ``max_histogram_rows`` rows (min(domain size, n) bounds it; the row
        count used for this choice stays in this process and changes no result), queries otherwise.
        """
        marginals = [tuple(int(a) for a in m) for m in marginals]
        for m in marginals:
            if not m or list(m) != sorted(set(m)) or m[-1] >= self.domain.n_attributes or m[0] < 0:
                raise ValueError(f"marginal {m}: expected ascending attribute indices in [0, "
                                 f"{self.domain.n_attributes})")
        if method not in ("auto", "histogram", "query"):
            raise ValueError(f"method {method!r}: expected 'auto', 'histogram' or 'query'")
        if method == "auto":
            small = (self._histogram is not None
                     or self._cells(range(self.domain.n_attributes)) <= self.max_histogram_rows)
            method = "histogram" if small or self.row_count() <= self.max_histogram_rows else "query"
        if method == "histogram":
            hist = self.histogram()
            return {m: hist.marginal(self.domain, m) for m in marginals}
        return self._marginals_by_query(marginals)

    def _packed_sizes(self, attributes: Sequence[int]) -> list[int]:
        """Digits per attribute in the packed key: its levels plus the FAULT_SHIFT fault codes."""
        return [int(self.domain.sizes[a]) + FAULT_SHIFT for a in attributes]

    def _packed_key(self, attributes: Sequence[int]) -> ibis.Value:
        """The codes of ``attributes`` as ONE BIGINT, row-major, each code shifted by FAULT_SHIFT so
        that fault codes (-5..-1) pack too: every code expression appears once in the query."""
        sizes = self._packed_sizes(attributes)
        if math.prod(sizes) >= 2**62:
            raise ValueError(f"attributes {tuple(attributes)}: {math.prod(sizes)} packed cells do not fit one BIGINT "
                             "key")
        key = None
        for a, size in zip(attributes, sizes):
            digit = self.bins.codes[a].cast("int64") + FAULT_SHIFT
            key = digit if key is None else key * size + digit
        return key

    def _unpack(self, keys: np.ndarray, attributes: Sequence[int]) -> np.ndarray:
        """Codes (len(keys) x len(attributes), int32) of packed keys; raises InputError on a fault code
        (the first faulty column in schema order, its kind by FAULT_ORDER, as the pandas path)."""
        sizes = self._packed_sizes(attributes)
        out = np.empty((keys.shape[0], len(attributes)), dtype=np.int32)
        rest = keys.copy()
        for j in range(len(attributes) - 1, -1, -1):
            out[:, j] = rest % sizes[j] - FAULT_SHIFT
            rest //= sizes[j]
        if out.size and out.min() < 0:
            self._raise_faults(out, attributes)
        return out

    def _packed_counts(self, attributes: Sequence[int]) -> ibis.Table:
        return self.bins.table.select(privsynth_key=self._packed_key(attributes)).group_by("privsynth_key") \
            .aggregate(**{COUNT: ibis._.count()})

    def _marginals_by_query(self, marginals: list[Marginal]) -> dict[Marginal, np.ndarray]:
        """One GROUP BY per marginal on its packed cell index, all in one UNION ALL query."""
        if not marginals:
            return {}
        parts = [self._packed_counts(m).mutate(**{MARGINAL_ID: ibis.literal(i, type="int32")})
                 for i, m in enumerate(marginals)]
        result = self._run(ibis.union(*parts, distinct=False))
        ids = result[MARGINAL_ID].to_numpy(zero_copy_only=False)
        keys = result["privsynth_key"].to_numpy(zero_copy_only=False).astype(np.int64)
        counts = result[COUNT].to_numpy(zero_copy_only=False).astype(np.float64)
        out = {}
        for i, m in enumerate(marginals):
            rows = ids == i
            codes = self._unpack(keys[rows], m)
            if self.drop_faulty_records:  # this marginal's faulty cells only: still one record per count
                keep = fault_free(codes)
                rows = np.flatnonzero(rows)[keep]
                codes = codes[keep]
            dims = tuple(self.domain.sizes[a] for a in m)
            cells = np.ravel_multi_index(tuple(codes.T), dims) if codes.shape[0] else np.zeros(0, dtype=np.int64)
            out[m] = np.bincount(cells, weights=counts[rows], minlength=self.domain.size_of(m)).astype(np.float64)
        return out

    # ------------------------------------------------------------ validation

    def validate(self):
        """The schema's checks as aggregates in place: a :class:`privsynth.engine.expectations.ValidationReport`."""
        from privsynth.engine.validation import validate_source

        return validate_source(self)


def fault_free(codes: np.ndarray) -> np.ndarray:
    """Rows of ``codes`` that hold no fault code (every code >= 0)."""
    return (codes >= 0).all(axis=1) if codes.size else np.ones(codes.shape[0], dtype=bool)


def close_matches(missing: list[str], names: list[str], schema: Schema) -> str:
    """" (did you mean 'signup_date'?)": the file's columns closest to the missing ones' names (a typo in the
    schema or the file). Only when some schema column is in the file: otherwise the "names" may be a data row
    (a headerless CSV) and are never quoted. '' when nothing is close."""
    import difflib

    if not set(names) & set(schema.column_names):
        return ""
    spare = [n for n in names if n not in schema.column_names]
    pairs = [(m, difflib.get_close_matches(m, spare, n=1, cutoff=0.75)) for m in missing]
    found = [f"{match[0]!r} for {m!r}" for m, match in pairs if match]
    return f" (did you mean {', '.join(found)}? a column of the file)" if found else ""


def _check_columns(opened: OpenedTable, schema: Schema) -> None:
    origin = f"input {opened.description}"
    names = list(opened.table.columns)
    check_input_width(len(names), origin)
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise InputError(f"{origin}: duplicate column name(s) {dupes}")
    missing = [c for c in schema.column_names if c not in names]
    if missing:
        raise InputError(f"{origin}: missing column(s) {missing}{close_matches(missing, names, schema)}; the schema "
                         f"{schema.name!r} expects {list(schema.column_names)}")
    types = opened.table.schema()
    for col in schema.kept_columns:
        problem = type_problem(col, types[col.name])
        if problem:
            raise InputError(f"{origin}: {problem}")


def open_source(data: Any, schema: Schema, options: EngineOptions | None = None,
                max_histogram_rows: int = DEFAULT_MAX_HISTOGRAM_ROWS) -> Source:
    """Open ``data`` for counting against ``schema``: reads metadata only (columns, types, file footers).

    ``data``: a path or URL (see :mod:`privsynth.engine.backends`), or a pandas / polars DataFrame,
    pyarrow Table or Dataset. Raises InputError naming the file or column when the columns or their
    types cannot hold the schema.
    """
    opened = open_table(data, schema, options)
    try:
        _check_columns(opened, schema)
        if schema.other_columns == "ignore":
            # Columns the schema does not list are never read (nor validated, nor counted).
            opened.table = opened.table.select(*schema.column_names)
        bins = binning(opened.table, schema, text_from_csv=opened.text_from_csv,
                       array_lookup=getattr(opened.backend, "name", "") == "duckdb")
    except BaseException:
        opened.close()
        raise
    return Source(opened, schema, bins, domain_of(schema), max_histogram_rows)


__all__ = ["Fault", "Source", "open_source"]
