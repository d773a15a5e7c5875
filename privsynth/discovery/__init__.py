"""``privsynth schema draft``: a schema file from a source's declared types, runnable as written with a DP pass.

Modules: ``declared`` (the source's types, metadata only), ``bounds`` (DP bounds and bin edges of
numeric and temporal columns), ``categories`` (DP category lists), ``quantiles`` (the exponential-
mechanism quantile), ``budget`` (the split by need), ``draft`` (each column's entry), ``dp_pass``
(charge, then measure), ``peek`` (the labelled non-DP peek), ``writer`` (the YAML).

Without an epsilon NOTHING about the values is read (TODOs to fill from documentation). With an
epsilon the whole draft is (epsilon, delta)-DP (rho-zCDP charged to the ledger before any value is
read, plus the categorical thresholds' small delta) and ``privsynth run`` accepts the file as written.
A non-DP look at the values happens only when asked for by name (``peek_without_dp``), labelled loudly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privsynth.discovery.categories import (
    THRESHOLD_DELTA_FRACTION,
    CategoryRelease,
    dp_categories,
    threshold,
)
from privsynth.discovery.declared import (
    IDENTIFIER_TOKENS,
    DeclaredColumn,
    classify_dtype,
    declared_columns,
    identifier_reason,
    name_tokens,
    open_declared,
)
from privsynth.discovery.dp_pass import release_key_for, run_dp_pass, to_read, value_counts
from privsynth.discovery.draft import (
    DEFAULT_BINS,
    ColumnDraft,
    DraftOptions,
    declared_drafts,
    draft_cost,
)
from privsynth.discovery.peek import peek_pass
from privsynth.discovery.quantiles import GRID_POINTS, dp_quantile, linear_grid, quantile_scores
from privsynth.discovery.writer import render
from privsynth.errors import ParameterError
from privsynth.privacy.accounting import PrivacyCost


@dataclass(frozen=True)
class DraftResult:
    text: str  # the YAML file's content
    columns: int
    dropped: int
    read: int  # columns whose values the DP pass read (0 without epsilon)
    cost: PrivacyCost | None
    dataset: str | None


def draft_schema(source: str, options: DraftOptions) -> DraftResult:
    """Draft a schema for ``source`` (see the module docstring for what is read and what it costs)."""
    opened, text_source = open_declared(source)
    try:
        drafts = declared_drafts(declared_columns(opened.table), options, text_source)
        read = to_read(drafts, options) if options.epsilon is not None else []
        cost = None
        dataset = None
        if options.epsilon is not None and read:
            cost, dataset = run_dp_pass(opened.table, drafts, options)
        elif options.peek_without_dp:
            peek_pass(opened.table, drafts, options)
            read = [d for d in drafts if d.column.identifier_reason is None
                    and d.column.kind in ("integer", "float", "categorical")]
        text = render(drafts, options, opened.description, text_source, cost, dataset)
    finally:
        opened.close()
    dropped = sum(1 for d in drafts if d.entry.get("drop"))
    return DraftResult(text, len(drafts), dropped, len(read) if cost or options.peek_without_dp else 0, cost, dataset)


def _number_or_text(text: str):
    try:
        return float(text)
    except ValueError:
        return text.strip()  # an ISO date or timestamp (a temporal column's bounds)


def parse_bounds(pairs: Sequence[str] | None) -> dict[str, tuple[Any, Any]]:
    """``COL=LOW:HIGH`` pairs (public bounds; numbers, or ISO dates for temporal columns) as a dict.

    Temporal bounds use '..' between ISO timestamps, which hold ':' themselves (``t=2013-01-01..2014-01-01``)."""
    out: dict[str, tuple[Any, Any]] = {}
    for pair in pairs or []:
        col, sep, rng = pair.partition("=")
        low, sep2, high = rng.partition("..") if ".." in rng else rng.partition(":")
        if not (sep and sep2 and col.strip() and low.strip() and high.strip()):
            raise ParameterError(f"--bounds expects COL=LOW:HIGH, got {pair!r}")
        out[col.strip()] = (_number_or_text(low), _number_or_text(high))
    return out


def parse_categories(pairs: Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    """``COL=a,b,c`` pairs (public categories) as a dict."""
    out: dict[str, tuple[str, ...]] = {}
    for pair in pairs or []:
        col, sep, values = pair.partition("=")
        cats = tuple(v.strip() for v in values.split(",") if v.strip())
        if not (sep and col.strip() and cats):
            raise ParameterError(f"--categories expects COL=a,b,c, got {pair!r}")
        out[col.strip()] = cats
    return out


def write_draft(source: str, output: str | Path, options: DraftOptions, overwrite: bool = False) -> DraftResult:
    """Draft and write the file (refusing to overwrite one unless asked, before anything is read or charged)."""
    output = Path(output)
    if output.exists() and not overwrite:
        raise ParameterError(f"--output {str(output)!r} exists; choose another path or pass --force")
    if not output.parent.is_dir():
        raise ParameterError(f"--output {str(output)!r}: folder {str(output.parent)!r} does not exist")
    result = draft_schema(source, options)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(result.text, encoding="utf-8")
    tmp.replace(output)
    return result


def default_name(source: str) -> str:
    """A schema name from the input: ?table=NAME, else the file's stem (letters, digits, '_')."""
    base, _, query = str(source).partition("?")
    for piece in query.split("&"):
        key, _, value = piece.partition("=")
        if key == "table" and value:
            return re.sub(r"[^A-Za-z0-9_]+", "_", value.rpartition(".")[2]) or "draft"
    stem = Path(base.split(":", 1)[-1] if base.lower().startswith("duckdb:") else base).name
    stem = re.sub(r"\.(csv|tsv|parquet|pq|gz|duckdb)$", "", re.sub(r"\.(csv|tsv)\.gz$", "", stem, flags=re.IGNORECASE),
                  flags=re.IGNORECASE)
    return re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_") or "draft"


__all__ = [
    "DEFAULT_BINS", "GRID_POINTS", "IDENTIFIER_TOKENS", "THRESHOLD_DELTA_FRACTION", "CategoryRelease",
    "ColumnDraft", "DeclaredColumn", "DraftOptions", "DraftResult", "classify_dtype",
    "declared_columns", "default_name", "dp_categories", "dp_quantile", "draft_cost", "draft_schema",
    "identifier_reason", "linear_grid", "name_tokens", "open_declared",
    "parse_bounds", "parse_categories", "quantile_scores", "release_key_for", "render", "threshold",
    "value_counts", "write_draft",
]
