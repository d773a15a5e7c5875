"""A column's DP release written into its draft: the category list, round 1's bounds, round 2's values or edges.

Each function spends the rho it is given on one DP measurement of the column (``categories``, ``bounds``,
``zoom``, ``points``), records that rho in the draft, and writes what the noisy result says (post-processing)
with a comment stating its cost and what a user can give instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privsynth.discovery import bounds as B
from privsynth.discovery import points as P
from privsynth.discovery import read_out as R
from privsynth.discovery import zoom as Z
from privsynth.discovery.beyond import beyond_bounds
from privsynth.discovery.categories import CategoryRelease, category_counts, merged_spellings
from privsynth.discovery.draft import NUMERIC, TEMPORAL, ColumnDraft, numeric_entry
from privsynth.discovery.figures import WIDE_BIN_FACTOR, edges_holding_values
from privsynth.discovery.unaccounted import account_for_present


def write_categories(d: ColumnDraft, release: CategoryRelease, rho: float, present: float | None = None) -> None:
    """A column's DP category list (its looks' release at ``rho`` in all) written into its draft; ``present``: a
    DP estimate of the column's present values (the facts'), from which the share that falls in <out-of-domain>
    is estimated (post-processing)."""
    from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL

    if present is not None and present > 0:
        d.ood_share = min(1.0, max(0.0, 1.0 - release.kept_mass / present))
    d.spent["categories"] = rho
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    cats = [v for v in merged_spellings(release) if v.strip() not in (MISSING_LABEL, OUT_OF_DOMAIN_LABEL)]
    d.entry["categories"] = cats
    kept = set(cats)
    d.category_counts = {v: c for v, c in category_counts(release).items() if v in kept}
    d.entry["on_out_of_domain"] = "category"
    d.entry["dp_released"] = [*(["type"] if "type" in d.entry.get("dp_released", []) else []), "categories"]
    if not cats:
        # Kept, never dropped for want of budget (nothing is dropped silently): every present value is
        # <out-of-domain>, so the release still holds the column's missing and present shares.
        d.comments.append(f"kept with no category: no value passed the threshold of the DP histogram (rho {rho:.4g}; "
                          f"{release.tau:.0f} rows at this budget), so every present value becomes <out-of-domain>; "
                          "to keep its values, list its public categories here and pass this file as --schema, give "
                          "a data contract (--public), or a larger epsilon")
        return
    d.comments.append(f"DP (rho {rho:.4g}): categories are the values whose noisy count passed the threshold "
                      f"({release.tau:.0f} rows at this budget); every other value becomes <out-of-domain>. Add "
                      "public categories it missed")
    if d.ood_share is not None:
        d.comments.append(f"DP estimate: about {100 * d.ood_share:.1f}% of its present values fall in <out-of-domain>; "
                          "to keep them, add them to categories here and pass this file as --schema, or give a data "
                          "contract (--public)")


def round_one_bounds(d: ColumnDraft, values: np.ndarray, counts: np.ndarray, rho: float, noise,
                     has_values: bool = True, present: tuple[float, float] | None = None) -> B.Bounds:
    """Round 1 of a numeric or temporal column: its DP bounds. Where no cell passes the threshold the column is
    kept (never dropped for want of budget): the fullest coarse cell where it stands out of the noise and
    ``has_values`` (its DP facts do not show a column of missing values), else [0, 1]. ``present``: the DP facts'
    count of its present numbers and its deviation, against which the bounds' cells are checked for rows they
    miss (``unaccounted.account_for_present``)."""
    c = d.column
    edges = B.year_edges(c.kind) if c.kind in TEMPORAL else B.log_edges()
    noisy, sigma = B.noisy_cells(B.cell_counts(values, counts, edges), rho, noise)
    d.spent["bounds"] = rho
    d.bounds_histogram = (edges, noisy, sigma)
    found = B.coarse_bounds(noisy, sigma, edges, integer=c.kind != "float")
    if found is None:
        # Kept, never dropped for want of budget: the fullest coarse cell of the same noisy histogram
        # (post-processing) is the best guess of where the values lie.
        found = B.fullest_cell(noisy, sigma, edges, integer=c.kind != "float") if has_values else None
        where = "that histogram's fullest coarse cell, a guess" if found is not None else \
            "[0, 1]: neither its DP facts nor that histogram show where its values lie"
        found = found or B.UNIT_SPAN
        d.comments.append(f"no cell of the DP histogram for its bounds (rho {rho:.4g}) passed the threshold: its "
                          f"bounds are {where}; give public bounds (--public, a schema) or a larger epsilon for "
                          "better ones")
    if present is not None and c.kind in NUMERIC and found is not B.UNIT_SPAN:
        found = account_for_present(found, noisy, sigma, edges, c.kind != "float", *present, value_step(d))
    return found


def value_step(d: ColumnDraft) -> float:
    """The step a number column's values are whole multiples of, by its DP precision: an integer's ``place_step``,
    a float's 10^-decimals; 0 where a float's precision is unknown (any number)."""
    if d.column.kind == "integer":
        return place_step(d)
    precision = d.entry.get("precision")
    return float(10 ** -int(precision)) if precision is not None else 0.0


INT64_END = 2.0**63  # an integer column is written as int64: whole numbers at or past this magnitude are not


def written_as_doubles(d: ColumnDraft) -> None:
    """A whole-number column whose DP bounds reach past int64 (a uint64 code, a constant 1e300) is a float column:
    its values are written as the doubles they are, not cut to int64's end (post-processing of its DP bounds)."""
    d.column = dataclasses.replace(d.column, kind="float")
    d.entry["type"] = "float"
    d.entry.pop("precision", None)
    d.entry.pop("place_shares", None)
    d.comments.append("whole numbers past int64's range (DP bounds): written as doubles")


def place_step(d: ColumnDraft) -> float:
    """The step an integer column's values are whole multiples of, by its DP precision (-1: 10); 1 otherwise."""
    precision = d.entry.get("precision")
    return float(10 ** -int(precision)) if d.column.kind == "integer" and precision is not None and precision < 0 \
        else 1.0


def round_two_edges(d: ColumnDraft, values: np.ndarray, counts: np.ndarray, rho: float, coarse: B.Bounds,
                    bins: int, noise, public: bool, delta_tau: float | None = None) -> None:
    """Round 2: a hierarchy of histograms over a fine public grid inside the bounds, read out
    (``read_out.read_out``) as a coded column's values or as bin edges; the bounds are never narrowed. Points
    (``points.value_points``): the public candidates and, with ``delta_tau`` (a number column whose DP facts show
    few values), its own values past the threshold for unknown values; where they hold the whole column, they are
    its values exactly (a coded column), else each is a bin of its own."""
    c = d.column
    integer = c.kind != "float"
    step = place_step(d)
    if c.kind in TEMPORAL:
        cell_edges = B.calendar_edges(coarse.low, coarse.high, c.kind, B.CALENDAR_CELLS)
    else:
        cell_edges = B.fine_edges(coarse.low, coarse.high, integer, step=step)
    cands = P.candidates(coarse.low, coarse.high, integer, step) if c.kind in NUMERIC else \
        P.temporal_candidates(coarse.low, coarse.high, c.kind) if not public else ()  # public: bounds alone
    short = B.cell_per_value(coarse.low, coarse.high, integer, step)  # a cell per value already
    look = delta_tau if c.kind in NUMERIC and not public and not short else None
    rho_points = P.POINTS_RHO_SHARE * rho if cands or look is not None else 0.0
    levels, fine = Z.measure_and_read(values, counts, cell_edges, rho - rho_points, noise, coarse, integer,
                                      c.kind == "integer", bins, public=public, numeric=c.kind in NUMERIC,
                                      round_one=d.bounds_histogram, step=step)
    if not public and c.kind in NUMERIC and d.bounds_histogram is not None and fine.codes is None:
        keep = R.trims_that_cut_mass(d.bounds_histogram, levels[0], coarse, fine.low, fine.high)
        if any(keep):  # a trim cut a tail round 1 counted: that end keeps round 1's bound (post-processing)
            fine = dataclasses.replace(R.read_out(levels, integer, bins, coarse, keep_ends=keep,
                                                  round_one=d.bounds_histogram, step=step), heaps=fine.heaps)
    present = float(levels[-1].noisy.sum())
    points, held, sigma_points = P.value_points(values, counts, cands, rho_points, noise, present, look) \
        if rho_points else ((), 0.0, 0.0)
    if look is not None and fine.codes is None and P.holds_the_column(held, len(points), sigma_points, levels[-1]):
        fine = B.FineResult(points[0], points[-1], (*points, points[-1] + 1.0), True, points)
    if not public and c.kind in NUMERIC and d.bounds_histogram is not None:
        points = tuple(sorted({*points, *P.zero_point(d.bounds_histogram, present)}))
    if points and fine.codes is None and not fine.small_domain:
        chosen = R.quantile_level(levels, fine.low, fine.high)
        fine = dataclasses.replace(fine, edges=P.with_points(fine.edges, points, integer,
                                                             lambda u, v: R.shows_data(chosen, u, v)))
    heaps: tuple[tuple[float, float], ...] = ()
    if c.kind in NUMERIC and fine.codes is None and not fine.small_domain:
        found = fine.heaps if fine.heaps is not None else P.heaps(levels[0], present, fine.low, fine.high, integer)
        heaps = tuple(h for h in found if not any(h[0] <= p < h[1] for p in points))  # a point is exact already
        fine = dataclasses.replace(fine, edges=P.with_spans(fine.edges, heaps))
    if c.kind in NUMERIC and d.entry.get("precision") is not None and fine.codes is None:
        held = edges_holding_values(fine.edges, int(d.entry["precision"]))
        fine = dataclasses.replace(fine, edges=held, low=held[0], high=held[-1])
    d.spent["edges"] = rho
    if not public and d.bounds_histogram is not None:  # public bounds: round 2's edge cells hold what they clip
        top = fine.codes[-1] if fine.codes is not None else fine.high  # a coded column writes its last code
        d.beyond = beyond_bounds(d.bounds_histogram, coarse, levels, fine.low, top, integer)
    if c.kind == "integer" and max(abs(fine.low), abs(fine.high)) >= INT64_END:
        written_as_doubles(d)
    numeric_entry(d, fine, ("bins",) if public else ("bounds", "bins"))
    d.comments = [x for x in d.comments if not x.startswith("TODO")]
    what = (f"a coded column: the {len(fine.codes)} {'whole numbers' if integer else 'values'} whose noisy count "
            "passed the threshold, exactly"
            if fine.codes is not None else
            f"calendar bins ({d.entry['bin_by']})" if "bin_by" in d.entry else
            f"{len(fine.edges) - 1} DP bins (quantile cuts; a bin over {WIDE_BIN_FACTOR:g}x the typical width split)"
            + (f", {len(points)} of them points written exactly ({', '.join(f'{p:g}' for p in points)})"
               if points and fine.codes is None else "")
            + (f", {len(heaps)} of them heaps round 2 showed ({', '.join(f'[{a:g}, {b:g})' for a, b in heaps)})"
               if heaps else ""))
    src = "PUBLIC bounds" if public else f"DP bounds (rho {d.spent.get('bounds', 0):.4g}, the widest span with signal)"
    d.comments.append(f"{src}; {what} from DP histograms on a fine public grid (rho {rho:.4g}); values outside "
                      "the domain are clipped to it")
