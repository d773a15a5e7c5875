"""Release keys and data fingerprints: HMACs under the ledger's secret, never plain hashes.

A plain hash of the input published anywhere lets whoever knows all records but one test candidates
for the last one (hash each candidate table, compare). Every key here is an HMAC-SHA256 under the
ledger's secret (``BudgetLedger.release_secret``), which never leaves the ledger, so a key that is
shown (a release-store folder name, a manifest entry) supports no such test.

* ``data_fingerprint``: HMAC of the canonical sparse histogram (distinct level-code rows sorted, with
  their counts): the same table gives the same fingerprint whatever its row order, file format or
  backend, because the histogram is all any mechanism sees.
* ``release_key``: HMAC of (fingerprint, schema hash, mechanism, full config, seed, run nonce). The
  same key means the same release: the ledger charges it once, the store persists it once, and a
  seeded noise stream is derived from it (``privsynth.privacy.noise.SeededNoise``).
* ``noise_stream_key``: HMAC of (seed, release key) under the same secret: a seeded run's stream key.
  The seed (privacy.json) and the release key (manifest.json) are public, so a stream derived from
  them alone could be rebuilt and subtracted from the measurements; keyed by the owner-only secret it
  cannot, while the owner (same ledger) still gets the same stream for the same seed.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import numpy as np

from privsynth.schema.workload import Histogram

KEY_VERSION = 2


def data_fingerprint(secret: bytes, histogram: Histogram) -> str:
    """HMAC-SHA256 (hex) of the canonical histogram under the ledger's secret."""
    _check_secret(secret)
    codes = np.ascontiguousarray(histogram.codes, dtype=np.int64)
    counts = np.ascontiguousarray(histogram.counts, dtype=np.int64)
    if codes.shape[0]:
        order = np.lexsort(codes.T[::-1])
        codes, counts = codes[order], counts[order]
    mac = hmac.new(secret, b"privsynth-data-v2\x00", hashlib.sha256)
    mac.update(np.asarray(codes.shape, dtype=np.int64).tobytes())
    mac.update(codes.tobytes())
    mac.update(counts.tobytes())
    return mac.hexdigest()


def release_key(secret: bytes, fingerprint: str, schema_hash: str, mechanism: str, config: dict,
                seed: int | None, nonce: str | None) -> str:
    """HMAC-SHA256 (hex) of the canonical JSON of what identifies one release.

    ``nonce`` is the run id for unseeded runs (fresh noise every run: each run is its own release,
    and a retry of the same run reuses it) and None for seeded runs (the same seed on the same data
    and config is the same release). ``config`` must be JSON-serialisable.
    """
    _check_secret(secret)
    for name, value in (("fingerprint", fingerprint), ("schema_hash", schema_hash), ("mechanism", mechanism)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ValueError(f"seed must be an int or None, got {seed!r}")
    payload = {"key_version": KEY_VERSION, "data": fingerprint, "schema": schema_hash, "mechanism": mechanism,
               "config": config, "seed": seed, "nonce": nonce}
    try:
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config must be JSON-serialisable with finite numbers: {exc}") from None
    return hmac.new(secret, canonical.encode("ascii"), hashlib.sha256).hexdigest()


def noise_stream_key(secret: bytes, seed: int, release_key: str) -> str:
    """HMAC-SHA256 (hex) of (seed, release key) under the ledger's secret: a seeded noise stream's key.

    Guarantee: without the secret the key is unpredictable (a PRF output), so the public seed and
    release key give no information about the stream; with the same secret it is the same key.
    """
    _check_secret(secret)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not isinstance(release_key, str) or not release_key:
        raise ValueError("a noise stream key needs the release key it belongs to")
    message = f"privsynth-noise-stream-v3\x00{seed}\x00{release_key}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise ValueError("the release-key secret must be at least 16 bytes (BudgetLedger.release_secret())")
