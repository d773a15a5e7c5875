"""A schema's structural zeros in aim's model (``schema.determined``): public cells held at zero.

A forbidden cell of a determined pair (an age of 35 in the group 18-29) gets a log-potential of -inf on a model
clique over the pair, present from the first fit: mirror descent adds finite steps to it, so it stays -inf, and
every later model warm-starts from these potentials, so every marginal the model gives and every record it
samples holds the zeros. The measurements, their noise and the privacy cost are untouched: the zeros come from the
schema, never from the rows, so this is a public constraint on post-processing.

Domain compression merges a pair's rare levels only where they allow the same partner levels: a merged level is
expanded back without regard to its partner (``compression.expand_codes``), so a merge of unlike levels could
land in a forbidden cell.

Measured (gss_vocab at epsilon 1, 6 seeds, the documented codes, in-process): records in forbidden cells 5.8% ->
0.1% (the rest from the rounding stage's replacement of unsupported ``<missing>`` values, before it kept the
zeros), 1- / 2- / 3-way TV 0.0039 / 0.0263 / 0.0663 -> 0.0034 / 0.0238 / 0.0624.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from privsynth.mechanisms.aim.compression import Compression, numbered
from privsynth.mechanisms.aim.model import Clique
from privsynth.schema.determined import StructuralZeros


def _signature(zeros: Sequence[StructuralZeros], attribute: int, level: int) -> tuple[bytes, ...]:
    """The partner levels ``level`` of ``attribute`` allows, in every pair that holds the attribute."""
    return tuple((z.allowed[level] if z.attributes[0] == attribute else z.allowed[:, level]).tobytes()
                 for z in zeros if attribute in z.attributes)


def keep_levels(compression: Compression, zeros: Sequence[StructuralZeros]) -> Compression:
    """``compression`` where it keeps the zeros: of each merged group of an attribute, only the levels that allow
    the same partner levels stay merged (the largest such set: years of schooling 0-5, all in the group under 12
    years; the others keep levels of their own), so a merged level expanded back lands in an allowed cell whichever
    level it becomes."""
    groups = list(compression.groups)
    for a in sorted({a for z in zeros for a in z.attributes}):
        if compression.is_identity(a):
            continue
        keys: list[Hashable] = [int(g) for g in groups[a]]
        for merged in np.flatnonzero(np.bincount(groups[a]) > 1):
            members = [int(level) for level in np.flatnonzero(groups[a] == merged)]
            alike: dict[tuple[bytes, ...], list[int]] = {}
            for level in members:
                alike.setdefault(_signature(zeros, a, level), []).append(level)
            stay = max(alike.values(), key=len)
            for level in members:
                if len(stay) < 2 or level not in stay:
                    keys[level] = ("own", level)
        groups[a] = numbered(keys, last=int(groups[a].max()))
    return compression.regrouped(groups)


def zero_potentials(zeros: Sequence[StructuralZeros], compression: Compression) -> dict[Clique, np.ndarray]:
    """Per zeros pair, a log-potential table on the compressed levels: 0 where allowed, -inf where forbidden (a
    merged level allows what its members allow: ``keep_levels`` merged only alike levels); two rules on one pair
    forbid the union of their cells."""
    out: dict[Clique, np.ndarray] = {}
    for z in zeros:
        a, b = z.attributes
        ga, gb = compression.groups[a], compression.groups[b]
        if z.allowed.shape != (ga.size, gb.size):
            raise ValueError(f"structural zeros of {z.names} have shape {z.allowed.shape}, the domain "
                             f"{(ga.size, gb.size)}")
        allowed = np.zeros((int(ga.max()) + 1, int(gb.max()) + 1), dtype=bool)
        np.logical_or.at(allowed, (ga[:, None], gb[None, :]), z.allowed)
        table = np.where(allowed, 0.0, -np.inf)
        out[z.attributes] = out[z.attributes] + table if z.attributes in out else table
    return out


def zeros_facts(zeros: Sequence[StructuralZeros]) -> dict[str, int]:
    """The release's public record of them: per pair, the cells held at zero."""
    return {" x ".join(z.names): z.forbidden_cells for z in zeros}
