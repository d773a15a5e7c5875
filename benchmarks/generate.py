"""Generated tables over the Adult domain, for scaling benchmarks (how time and memory grow with n).

The table is sampled from a random Bayesian network with a fixed seed: attribute 0 from a random
distribution, and every later attribute j from a conditional table given its two predecessors
(j-1, j-2), each row of the table drawn from a Dirichlet with small concentration so the conditionals
are peaked (the data then has real 2- and 3-way structure, unlike uniform noise). Nothing here reads
real data: only the public domain sizes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from privsynth.schema.encoding import Domain


def random_chain_network(domain: Domain, seed: int, concentration: float = 0.3) -> list[np.ndarray]:
    """Conditional probability tables: cpt[j] has shape (parent levels..., sizes[j])."""
    rng = np.random.default_rng(seed)
    cpts = []
    for j, size in enumerate(domain.sizes):
        parents = tuple(domain.sizes[p] for p in range(max(0, j - 2), j))
        cpts.append(rng.dirichlet(np.full(size, concentration), size=parents or None))
    return cpts


def _draw(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cdf = np.cumsum(probabilities, axis=-1)
    u = rng.uniform(size=probabilities.shape[:-1] + (1,)) * cdf[..., -1:]
    return np.minimum((u > cdf).sum(axis=-1), probabilities.shape[-1] - 1)


def iter_generated_batches(domain: Domain, rows: int, seed: int, batch_rows: int = 100_000) -> Iterator[np.ndarray]:
    """``rows`` generated records as int32 code batches; memory is bounded by one batch."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    cpts = random_chain_network(domain, seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    done = 0
    while done < rows:
        m = min(batch_rows, rows - done)
        codes = np.empty((m, domain.n_attributes), dtype=np.int32)
        for j, cpt in enumerate(cpts):
            parents = tuple(codes[:, p] for p in range(max(0, j - 2), j))
            probs = cpt[parents] if parents else np.broadcast_to(cpt, (m, cpt.size))
            codes[:, j] = _draw(probs, rng)
        done += m
        yield codes


def generate_codes(domain: Domain, rows: int, seed: int) -> np.ndarray:
    """All generated records at once (rows x attributes int32)."""
    return np.concatenate(list(iter_generated_batches(domain, rows, seed)), axis=0)


# The "337,000-row public transport table": 18 kept columns, 225 one-hot levels (sizes 2 to 40).
TRANSPORT_SIZES = (2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 25, 30, 40)
TRANSPORT_ROWS = 337_000


def sized_domain(sizes: tuple[int, ...], seed: int = 0) -> Domain:
    """A domain with these level counts in a fixed shuffled order (columns c00, c01, ...): public facts only."""
    order = np.random.default_rng(seed).permutation(len(sizes))
    return Domain(tuple(f"c{j:02d}" for j in range(len(sizes))), tuple(int(sizes[i]) for i in order))


def transport_like_domain() -> Domain:
    """18 columns whose level counts total 225, in the class of the issue's transport table."""
    return sized_domain(TRANSPORT_SIZES)


def wide_domain(n_columns: int, seed: int = 0) -> Domain:
    """``n_columns`` columns with level counts drawn from 2..16 (fixed seed), for scaling in the columns."""
    sizes = np.random.default_rng([seed, n_columns]).integers(2, 17, n_columns)
    return Domain(tuple(f"c{j:02d}" for j in range(n_columns)), tuple(int(s) for s in sizes))


def generated_histogram(domain: Domain, rows: int, seed: int, batch_rows: int = 200_000):
    """The histogram (distinct records and counts) of ``rows`` generated records, built batch by batch:
    memory is one batch plus the distinct records. Records are packed into one int64 key per row when
    the domain fits (mixed radix), else merged with ``Histogram.merge``."""
    from privsynth.schema.workload import Histogram

    sizes = np.asarray(domain.sizes, dtype=np.int64)
    if float(np.prod(sizes.astype(np.float64))) >= 2.0**62:
        parts = [Histogram.of_codes(codes) for codes in iter_generated_batches(domain, rows, seed, batch_rows)]
        return Histogram.merge(parts)
    strides = np.concatenate([np.cumprod(sizes[::-1])[::-1][1:], [1]])
    key_parts, count_parts = [], []
    for codes in iter_generated_batches(domain, rows, seed, batch_rows):
        batch_keys, batch_counts = np.unique(codes.astype(np.int64) @ strides, return_counts=True)
        key_parts.append(batch_keys)
        count_parts.append(batch_counts)
    keys, inverse = np.unique(np.concatenate(key_parts), return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=np.concatenate(count_parts), minlength=keys.size).astype(np.int64)
    codes = np.stack(np.unravel_index(keys, tuple(int(s) for s in sizes)), axis=1).astype(np.int32)
    return Histogram(codes, counts)
