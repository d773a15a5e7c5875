"""The random reduced space of the cube the sampler works on (data-independent: drawn before any
statistic is read), and the decoding of released sign points back to the table's levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsynth.errors import ReducedSpaceError  # noqa: F401  (re-exported: raised here)
from privsynth.mechanisms.private_sampling import bounds
from privsynth.mechanisms.private_sampling.walsh import (
    n_walsh,
    signs_to_bits,
    walsh_features,
)
from privsynth.schema.encoding import Domain, from_binary


@dataclass(frozen=True, repr=False)
class ReducedSpace:
    """S (m x p signs), its Walsh matrix M, M^T M, s_min(M) and how many draws it took (all data-independent)."""

    signs: np.ndarray
    M: np.ndarray
    gram: np.ndarray
    s_min: float
    threshold: float
    attempts: int

    def __repr__(self) -> str:
        return (f"ReducedSpace(m={self.signs.shape[0]}, p={self.signs.shape[1]}, s_min={self.s_min:.4g}, "
                f"attempts={self.attempts})")


def smallest_singular_value(gram: np.ndarray) -> float:
    """s_min(M) = sqrt(lambda_min(M^T M)) (O(N^3) on the N x N Gram matrix instead of an m x N SVD)."""
    return float(math.sqrt(max(float(np.linalg.eigvalsh(gram)[0]), 0.0)))


def draw_reduced_space(rng: np.random.Generator, m: int, p: int, d: int, max_redraws: int) -> ReducedSpace:
    """S uniform i.i.d. on {-1,1}^p, redrawn until s_min(M) >= sqrt(m)/(2e^d) ([PS] (9.1), section 3.3).

    Takes no data: S is independent of X by construction."""
    N = n_walsh(p, d)
    if m < N:
        raise ReducedSpaceError(f"m={m} < N={N} Walsh features: s_min(M) = 0 for every S; use m >= {2 * N}")
    threshold = bounds.well_conditioning_threshold(m, d)
    best = 0.0
    for attempt in range(1, max_redraws + 1):
        signs = (2 * rng.integers(0, 2, size=(m, p), dtype=np.int8) - 1).astype(np.int8)
        M = walsh_features(signs, d)
        gram = M.T @ M
        s_min = smallest_singular_value(gram)
        if s_min >= threshold:
            return ReducedSpace(signs=signs, M=M, gram=gram, s_min=s_min, threshold=threshold, attempts=attempt)
        best = max(best, s_min)
    raise ReducedSpaceError(
        f"no well-conditioned reduced space in {max_redraws} draws (m={m}, N={N}, best s_min={best:.4g} < "
        f"threshold sqrt(m)/(2e^d)={threshold:.4g}); increase m (m >= 2N usually passes at once) or max_redraws")


def decode_points(signs: np.ndarray, domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Codes of cube points (invalid binary codes -> code mod size) and the mask of invalid fields."""
    return from_binary(signs_to_bits(signs), domain)
