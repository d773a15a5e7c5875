"""Discovery's category counts handed to the mechanism (docs/design.md section 2: the discover stage's noisy
1-way histograms are measurements of the run, never paid twice).

A no-schema run's discover stage releases, per categorical column, a noisy count of each category it keeps
(``discovery.categories.category_counts``; recorded in discovery.json, so a resumed run joins the counts it
drew). Those counts are DP outputs the run has already charged: the mechanism stage hands them to a mechanism
that takes them (``Mechanism.takes_earlier_counts``), which joins them with its own 1-way measurements. That is
post-processing and costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from privsynth.mechanisms.base import EarlierCounts
from privsynth.schema import Schema

CategoryCounts = Mapping[str, Mapping[str, tuple[float, float]]]  # column -> category -> (noisy count, sigma)


def earlier_counts(schema: Schema, counts: CategoryCounts) -> tuple[EarlierCounts, ...]:
    """``counts`` (column -> category -> (noisy count, sigma)) on the mechanism's domain: per kept categorical
    column, the levels of its categories that have a count, in level order. A column or category the schema does
    not hold is left out."""
    out = []
    for attribute, column in enumerate(schema.kept_columns):
        held = counts.get(column.name)
        if not held or column.type != "categorical":
            continue
        levels = [(i, held[label]) for i, label in enumerate(column.labels) if label in held]
        if levels:
            out.append(EarlierCounts(attribute, tuple(i for i, _ in levels), tuple(float(c) for _, (c, _) in levels),
                                     tuple(float(s) for _, (_, s) in levels)))
    return tuple(out)


def keyed_config(config: dict, earlier: tuple[EarlierCounts, ...]) -> dict:
    """The config as the release key reads it: with the earlier counts where there are any (the release depends
    on them, so a run without them never reuses a release drawn with them); as given where there are none."""
    if not earlier:
        return config
    return {**config, "earlier_counts": [[e.attribute, list(e.levels), list(e.noisy_counts), list(e.sigmas)]
                                         for e in earlier]}
