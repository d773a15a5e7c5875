"""Noise sources for the private mechanisms.

Two implementations of one small interface:

* ``SecureNoise`` (production default): Laplace, Gaussian and report-noisy-max come from OpenDP's
  samplers, which are exact and hardened against floating-point attacks (Mironov 2012). Categorical
  draws whose randomness *is* the privacy mechanism (private sampling) use the operating system's
  CSPRNG. Post-processing randomness (rounding, initialisation) uses a numpy generator seeded from
  OS entropy: it needs no secrecy beyond that.
* ``SeededNoise`` (when the user passes a seed): every draw comes from a seeded numpy generator, so
  runs are reproducible; the privacy report then says the run is *not* hardened against
  floating-point attacks. A release's stream is keyed by the ledger's owner-only secret
  (``make_noise_source`` with ``privsynth.privacy.keys.noise_stream_key``): the published seed and
  release key never suffice to rebuild it.

A noise source refuses to draw privacy noise until ``authorize`` has been called: the pipeline
authorizes it only after the budget ledger has been charged (docs/design.md 5.2), with the charged cost as its
allowance. Each privacy draw states the sensitivity of what it noises, and the source's meter
(``privacy.meter``) prices the draw against that allowance before making it: a draw past the charge raises
``InternalError``. ``one_release`` scopes draws that make one release (a redrawing selection; a sampler with
its own proof).

With a journal attached (``attach_journal``, docs/design.md 5.3) every call is kept as it is drawn, before
its result is returned, and a resumed release replays the recorded results in order (a seeded stream is
advanced by the same draws, so what comes after continues it exactly), then draws fresh.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from privsynth.errors import BudgetNotChargedError  # noqa: F401  (re-exported: raised here)
from privsynth.privacy.accounting import PrivacyCost
from privsynth.privacy.meter import NoiseMeter, Price, gaussian_price, laplace_price, noisy_max_price


class NoiseSource(ABC):
    secure: bool

    def __init__(self, post_processing_seed: int | None) -> None:
        self._authorized = False
        self.charge_reference: str | None = None
        self.meter = NoiseMeter(None)
        self.post_rng = np.random.default_rng(post_processing_seed)
        self.journal = None  # privsynth.privacy.journal.NoiseJournal, when the release keeps one

    def attach_journal(self, journal) -> None:
        """Keep every draw in ``journal`` and replay what it holds. An unseeded source takes the journal's
        post-processing seed, so its non-private choices (aim's candidate pools) are those of the first attempt
        and each replayed selection index still names the same candidate."""
        if journal.header.post_seed is not None:
            self.post_rng = np.random.default_rng(journal.header.post_seed)
        self.journal = journal

    def _recorded(self, kind: str, params: dict, draw: Callable[[], np.ndarray]) -> np.ndarray:
        """Every draw goes through here: replayed from the journal while it holds one, else drawn and kept
        (durably, before it is returned)."""
        if self.journal is None:
            return draw()
        from privsynth.privacy.journal import DrawCall

        call = DrawCall(kind, tuple(params.items()))
        replayed = self.journal.replay(call)
        if replayed is not None:
            if not self.secure:
                draw()  # advance the seeded stream by the same draw: the rest continues it bit for bit
            return replayed
        result = np.asarray(draw())
        self.journal.append(call, result)
        return result

    def authorize(self, charge_reference: str, allowance: PrivacyCost | None = None) -> None:
        """Allow privacy noise to be drawn; called once the ledger holds the charge. ``allowance``: the cost
        charged, which every draw is priced against (None: counted, not checked; the audit's own sources)."""
        if not charge_reference:
            raise ValueError("authorize needs the reference of the ledger charge")
        self.charge_reference = charge_reference
        self.meter = NoiseMeter(allowance)
        self._authorized = True

    def one_release(self, price: Price):
        """A scope whose draws make one release of cost ``price`` (``NoiseMeter.one_release``)."""
        return self.meter.one_release(price)

    def _pay(self, what: str, price_of: Callable[..., Price], scale: float, sensitivity: float | None,
             *more: int) -> None:
        """The meter's payment for a draw at ``scale`` on a statistic of ``sensitivity`` (None: unpriced)."""
        self.meter.pay(what, None if sensitivity is None else price_of(scale, sensitivity, *more))

    def _require_authorized(self) -> None:
        if not self._authorized:
            raise BudgetNotChargedError("privacy noise requested before the budget was charged")

    @staticmethod
    def _check_scale(scale: float) -> None:
        # numbers.Real admits numpy scalars (a scale computed with numpy is common); bool is refused.
        if not (isinstance(scale, numbers.Real) and not isinstance(scale, (bool, np.bool_))
                and math.isfinite(scale) and scale > 0):
            raise ValueError(f"noise scale must be a finite number > 0, got {scale!r}")

    @staticmethod
    def _check_scores(scores: np.ndarray, what: str) -> np.ndarray:
        # A NaN score would win numpy's argmax outright (and OpenDP refuses it): reject it here.
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1 or scores.size == 0:
            raise ValueError(f"{what} needs a non-empty vector of scores")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{what} needs finite scores")
        return scores

    def laplace(self, scale: float, size: int, *, sensitivity: float | None = None) -> np.ndarray:
        """i.i.d. Laplace(0, scale) noise; ``sensitivity``: the L1 sensitivity of what it noises (its price)."""
        self._require_authorized()
        self._check_scale(scale)
        self._pay("laplace", laplace_price, scale, sensitivity)
        return self._recorded("laplace", {"scale": float(scale), "size": int(size)},
                              lambda: self._laplace(float(scale), int(size)))

    def gaussian(self, scale: float, size: int, *, sensitivity: float | None = None) -> np.ndarray:
        """i.i.d. N(0, scale^2) noise; ``sensitivity``: the L2 sensitivity of what it noises (its price)."""
        self._require_authorized()
        self._check_scale(scale)
        self._pay("gaussian", gaussian_price, scale, sensitivity)
        return self._recorded("gaussian", {"scale": float(scale), "size": int(size)},
                              lambda: self._gaussian(float(scale), int(size)))

    def add_laplace(self, values: np.ndarray, scale: float, *, sensitivity: float | None = None) -> np.ndarray:
        """values + i.i.d. Laplace(0, scale): the Laplace mechanism applied to the statistic itself, whose L1
        sensitivity is ``sensitivity`` (the draw's price).

        Use this rather than ``values + laplace(...)``: with SecureNoise the addition happens inside
        OpenDP's measurement (its floating-point-safe proof covers the sum, not only the noise).
        """
        self._require_authorized()
        self._check_scale(scale)
        values = self._check_values(values)
        self._pay("add_laplace", laplace_price, scale, sensitivity)
        return self._recorded("add_laplace", {"scale": float(scale), "shape": values.shape},
                              lambda: self._add_laplace(values, float(scale)))

    def add_gaussian(self, values: np.ndarray, scale: float, *, sensitivity: float | None = None) -> np.ndarray:
        """values + i.i.d. N(0, scale^2): the Gaussian mechanism applied to the statistic itself, of L2 sensitivity
        ``sensitivity`` (see add_laplace)."""
        self._require_authorized()
        self._check_scale(scale)
        values = self._check_values(values)
        self._pay("add_gaussian", gaussian_price, scale, sensitivity)
        return self._recorded("add_gaussian", {"scale": float(scale), "shape": values.shape},
                              lambda: self._add_gaussian(values, float(scale)))

    @staticmethod
    def _check_values(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError("a noised statistic must be finite")
        return values

    def noisy_max(self, scores: np.ndarray, scale: float, *, sensitivity: float | None = None) -> int:
        """argmax_i scores_i + Gumbel(scale): (Delta^2 / (2 scale^2))-zCDP for scores of L-inf sensitivity
        Delta = ``sensitivity``."""
        self._require_authorized()
        self._check_scale(scale)
        scores = self._check_scores(scores, "noisy_max")
        self._pay("noisy_max", noisy_max_price, scale, sensitivity)
        return int(self._recorded("noisy_max", {"scale": float(scale), "size": scores.size},
                                  lambda: np.asarray(self._noisy_max(scores, float(scale)), dtype=np.int64)))

    def noisy_top_k(self, scores: np.ndarray, scale: float, k: int, *, sensitivity: float | None = None) -> np.ndarray:
        """k distinct indices by peeling report-noisy-max (Gumbel); costs k noisy_max calls."""
        self._require_authorized()
        self._check_scale(scale)
        scores = self._check_scores(scores, "noisy_top_k")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not (1 <= k <= scores.size):
            raise ValueError(f"noisy_top_k needs 1 <= k <= {scores.size}, got {k}")
        self._pay("noisy_top_k", noisy_max_price, scale, sensitivity, int(k))
        return self._recorded("noisy_top_k", {"scale": float(scale), "size": scores.size, "k": int(k)},
                              lambda: np.asarray(self._noisy_top_k(scores, float(scale), int(k)), dtype=np.int64))

    def choice(self, probabilities: np.ndarray, size: int) -> np.ndarray:
        """Indices drawn i.i.d. from a probability vector, when the draw itself is the DP mechanism: priced by
        its mechanism's proof, so drawn inside ``one_release(price)``."""
        self._require_authorized()
        p = np.asarray(probabilities, dtype=np.float64)
        if p.ndim != 1 or p.size == 0 or np.any(p < 0) or not math.isclose(p.sum(), 1.0, rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError("choice needs a non-negative probability vector that sums to 1")
        self.meter.pay("choice", None)
        return self._recorded("choice", {"categories": p.size, "size": int(size)},
                              lambda: np.asarray(self._choice(p, int(size)), dtype=np.int64))

    def describe(self) -> dict:
        raise NotImplementedError

    @abstractmethod
    def _laplace(self, scale: float, size: int) -> np.ndarray: ...

    @abstractmethod
    def _gaussian(self, scale: float, size: int) -> np.ndarray: ...

    def _add_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        return values + self._laplace(scale, values.size).reshape(values.shape)

    def _add_gaussian(self, values: np.ndarray, scale: float) -> np.ndarray:
        return values + self._gaussian(scale, values.size).reshape(values.shape)

    @abstractmethod
    def _noisy_max(self, scores: np.ndarray, scale: float) -> int: ...

    @abstractmethod
    def _noisy_top_k(self, scores: np.ndarray, scale: float, k: int) -> np.ndarray: ...

    @abstractmethod
    def _choice(self, p: np.ndarray, size: int) -> np.ndarray: ...


class SeededNoise(NoiseSource):
    """Reproducible noise from numpy's PCG64; not hardened against floating-point attacks.

    TESTING FEATURE. The stream is derived from the seed AND ``stream_key``. For a release the stream
    key is ``noise_stream_key(secret, seed, release_key)`` (``make_noise_source``): an HMAC under the
    ledger's owner-only secret of the seed and the release key (itself an HMAC over the data
    fingerprint, schema, mechanism and full config). So two releases never share noise (with one
    stream for a seed, two runs at different epsilons on one table would give n exactly,
    n = (s2 n1 - s1 n2) / (s2 - s1)), and the public seed and release key do not rebuild it (they
    would give the exact counts as measurements minus noise). Any other stream key (tests, the
    audit's synthetic tables) must protect nothing.
    """

    secure = False

    def __init__(self, seed: int, stream_key: str) -> None:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if not isinstance(stream_key, str) or not stream_key:
            raise ValueError("a seeded noise stream needs its stream key")
        streams = np.random.SeedSequence(stream_entropy(int(seed), stream_key)).spawn(2)
        super().__init__(post_processing_seed=int(streams[1].generate_state(1)[0]))
        self._rng = np.random.default_rng(streams[0])
        self.seed = int(seed)

    def _laplace(self, scale: float, size: int) -> np.ndarray:
        return self._rng.laplace(0.0, scale, size)

    def _gaussian(self, scale: float, size: int) -> np.ndarray:
        return self._rng.normal(0.0, scale, size)

    def _noisy_max(self, scores: np.ndarray, scale: float) -> int:
        return int(np.argmax(scores + self._rng.gumbel(0.0, scale, scores.size)))

    def _noisy_top_k(self, scores: np.ndarray, scale: float, k: int) -> np.ndarray:
        # One-shot Gumbel top-k has the same distribution as k peeling Gumbel-max calls
        # (Durfee & Rogers 2019), at one pass over the scores.
        noisy = scores + self._rng.gumbel(0.0, scale, scores.size)
        top = np.argpartition(-noisy, k - 1)[:k]
        return top[np.argsort(-noisy[top], kind="stable")]

    def _choice(self, p: np.ndarray, size: int) -> np.ndarray:
        return self._rng.choice(p.size, size=size, p=p / p.sum())

    def describe(self) -> dict:
        return {
            "sampler": "numpy PCG64 (seeded)",
            "seed": self.seed,
            "reproducible": True,
            "hardened_against_floating_point_attacks": False,
            "note": "A seed was given: the run is reproducible but its noise is not hardened against "
            "floating-point attacks. Omit --seed for production releases.",
        }


class SecureNoise(NoiseSource):
    """OpenDP samplers for Laplace, Gaussian and noisy max; the OS CSPRNG for categorical draws."""

    secure = True

    def __init__(self) -> None:
        super().__init__(post_processing_seed=None)
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self._dp = dp
        self._cache: dict = {}
        self._system_random = secrets.SystemRandom()

    def _measurement(self, kind: str, scale: float):
        key = (kind, scale)
        if key not in self._cache:
            dp = self._dp
            vector = dp.vector_domain(dp.atom_domain(T=float, nan=False))
            if kind == "laplace":
                self._cache[key] = dp.m.make_laplace(vector, dp.l1_distance(T=float), scale=scale)
            elif kind == "gaussian":
                self._cache[key] = dp.m.make_gaussian(vector, dp.l2_distance(T=float), scale=scale)
            else:
                self._cache[key] = dp.m.make_noisy_max(
                    vector, dp.linf_distance(T=float, monotonic=False), dp.zero_concentrated_divergence(), scale=scale
                )
        return self._cache[key]

    def _laplace(self, scale: float, size: int) -> np.ndarray:
        return np.asarray(self._measurement("laplace", scale)([0.0] * size), dtype=np.float64)

    def _gaussian(self, scale: float, size: int) -> np.ndarray:
        return np.asarray(self._measurement("gaussian", scale)([0.0] * size), dtype=np.float64)

    def _add_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        flat = self._measurement("laplace", scale)(values.ravel().tolist())
        return np.asarray(flat, dtype=np.float64).reshape(values.shape)

    def _add_gaussian(self, values: np.ndarray, scale: float) -> np.ndarray:
        flat = self._measurement("gaussian", scale)(values.ravel().tolist())
        return np.asarray(flat, dtype=np.float64).reshape(values.shape)

    def _noisy_max(self, scores: np.ndarray, scale: float) -> int:
        return int(self._measurement("noisy_max", scale)(scores.tolist()))

    def _noisy_top_k(self, scores: np.ndarray, scale: float, k: int) -> np.ndarray:
        remaining = np.arange(scores.size)
        chosen = []
        for _ in range(k):
            pick = self._noisy_max(scores[remaining], scale)
            chosen.append(int(remaining[pick]))
            remaining = np.delete(remaining, pick)
        return np.asarray(chosen, dtype=np.int64)

    def _choice(self, p: np.ndarray, size: int) -> np.ndarray:
        cdf = np.cumsum(p / p.sum())
        cdf[-1] = 1.0
        uniforms = np.array([self._system_random.random() for _ in range(size)], dtype=np.float64)
        return np.minimum(np.searchsorted(cdf, uniforms, side="right"), p.size - 1)

    def describe(self) -> dict:
        return {
            "sampler": "OpenDP (Laplace, Gaussian, noisy max) and the OS CSPRNG (categorical draws)",
            "seed": None,
            "reproducible": False,
            "hardened_against_floating_point_attacks": True,
            "note": "Production noise: OpenDP's exact samplers; post-processing randomness from OS entropy.",
        }


def stream_entropy(seed: int, stream_key: str) -> list[int]:
    """SeedSequence entropy from the seed and the stream key (32-bit words of a sha256).

    Only as secret as ``stream_key``: for a release that is the secret-keyed ``noise_stream_key``.
    """
    digest = hashlib.sha256(f"privsynth-noise-stream-v2\x00{seed}\x00{stream_key}".encode()).digest()
    return [int(seed)] + [int.from_bytes(digest[i:i + 4], "little") for i in range(0, len(digest), 4)]


def make_noise_source(seed: int | None, release_key: str, secret: bytes | None = None) -> NoiseSource:
    """A release's noise: OpenDP's secure samplers, or with a seed (testing) a numpy stream keyed by
    ``noise_stream_key(secret, seed, release_key)``, so only the ledger's owner can reproduce it.

    ``secret`` is the ledger's release secret (``BudgetLedger.release_secret``); it is required for a
    seeded source and never falls back to a public derivation.
    """
    if seed is None:
        return SecureNoise()
    if secret is None:
        raise ValueError("a seeded noise source needs the ledger's secret: a stream from the public seed "
                         "and release key alone could be rebuilt by anyone")
    from privsynth.privacy.keys import noise_stream_key

    return SeededNoise(seed, noise_stream_key(secret, int(seed), release_key))
