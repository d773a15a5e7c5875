"""The noise journal of a release (docs/design.md 5.3): every noisy draw is kept as it is drawn, so a run
killed at any point loses neither its budget nor its work.

A journal is one append-only, owner-only file (0600 in the 0700 release store, ``.journals/<release key>``),
named by the release key (an HMAC under the ledger's secret, never a hash of the data). Its first record is
the header (the format version, the release key, what the charge was for, the sampler, the seed, and the
post-processing seed of an unseeded source); every later record is one call of the noise source: its kind
and public parameters (scale, shape, k) and the result it returned, appended and flushed to the disk
BEFORE the result is handed to the mechanism. Each record is framed as

    length (4 bytes, big-endian) | sha256 of the payload (32 bytes) | payload

so a record that a kill cut short (too short for its length, or a checksum that does not match) is
detected and discarded with everything after it; the draw it held was never used.

Guarantee: replaying a journal re-uses exactly the draws the killed attempt made, in order, and draws only
what it never drew; nothing is drawn while a call does not match its record (another code path, another
mechanism or parameters): that is a refusal (``NoiseJournalError``) before any fresh draw. The journal
holds noisy results (DP outputs) and public call parameters only: no exact count, value or data hash.

A remote (fsspec) release store keeps the journal beside its releases (``JournalPlace.remote``): the whole
file is uploaded after every append, so a worker that dies leaves it for the next one. It is never written
to a run folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privsynth.errors import NoiseJournalError
from privsynth.io.atomic import OWNER_ONLY_FILE
from privsynth.io.home import make_private_dir

if TYPE_CHECKING:  # for its type only: the journal imports no storage backend
    from privsynth.io.storage import RemoteFolder

FORMAT = "privsynth-noise-journal"
VERSION = 1
JOURNALS = ".journals"  # hidden in the release store: its visible entries are releases
_LENGTH = struct.Struct(">I")
_DIGEST = 32
_FRAME = _LENGTH.size + _DIGEST


@dataclass(frozen=True)
class JournalHeader:
    """What a journal belongs to. Two attempts share a journal only if every field is equal."""

    release_key: str
    purpose: str          # what the charge was for ("aim release", "discovery (the run's schema)")
    sampler: str          # "secure" or "seeded": a seeded stream is never continued by OpenDP, nor the reverse
    seed: int | None
    post_seed: int | None  # an unseeded source's post-processing seed, so its non-private choices replay too
    format: str = FORMAT
    version: int = VERSION

    def differences(self, other: JournalHeader) -> list[str]:
        """The names of the fields that differ, except post_seed (drawn per journal); no value is named."""
        mine, theirs = asdict(self), asdict(other)
        return [name for name in mine if name != "post_seed" and mine[name] != theirs[name]]


@dataclass(frozen=True)
class DrawCall:
    """One call of the noise source, by its public parameters only (kind, scale, shapes, k)."""

    kind: str
    params: tuple[tuple[str, object], ...]

    def to_json(self) -> dict:
        return {"kind": self.kind, "params": [list(p) for p in self.params]}

    @staticmethod
    def from_json(doc: dict) -> DrawCall:
        return DrawCall(doc["kind"], tuple((k, _tuple(v)) for k, v in doc["params"]))

    def describe(self) -> str:
        return f"{self.kind}(" + ", ".join(f"{k}={v}" for k, v in self.params) + ")"


def _tuple(value):
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


# ---------------------------------------------------------------- framing (pure)

def frame(payload: bytes) -> bytes:
    """One record as written: its length, its checksum, itself."""
    return _LENGTH.pack(len(payload)) + hashlib.sha256(payload).digest() + payload


def unframe(data: bytes) -> tuple[list[bytes], int]:
    """The complete records at the start of ``data`` and the length they take; a short or corrupt
    record ends the journal there (a torn append: it and anything after it are discarded)."""
    payloads, at = [], 0
    while at + _FRAME <= len(data):
        (length,) = _LENGTH.unpack_from(data, at)
        end = at + _FRAME + length
        payload = data[at + _FRAME:end]
        if end > len(data) or hashlib.sha256(payload).digest() != data[at + _LENGTH.size:at + _FRAME]:
            break
        payloads.append(payload)
        at = end
    return payloads, at


def encode(meta: dict, array: np.ndarray | None = None) -> bytes:
    """A payload: its JSON part (length-prefixed), then the result's bytes (little-endian, C order)."""
    if array is not None:
        array = np.asarray(array, dtype=array.dtype.newbyteorder("<"))  # tobytes() below is C order
        meta = dict(meta, dtype=array.dtype.str, shape=list(array.shape))
    text = json.dumps(meta, sort_keys=True).encode()
    return _LENGTH.pack(len(text)) + text + (array.tobytes() if array is not None else b"")


def decode(payload: bytes) -> tuple[dict, np.ndarray | None]:
    (length,) = _LENGTH.unpack_from(payload, 0)
    meta = json.loads(payload[_LENGTH.size:_LENGTH.size + length])
    if "dtype" not in meta:
        return meta, None
    raw = payload[_LENGTH.size + length:]
    return meta, np.frombuffer(raw, dtype=np.dtype(meta["dtype"])).reshape(meta["shape"]).copy()


# ---------------------------------------------------------------- where a journal lives

@dataclass(frozen=True)
class JournalPlace:
    """A release's journal: a local file, and (for a remote release store) its copy at the store's URL."""

    path: Path
    remote: RemoteFolder | None = None
    remote_name: str | None = None  # the journal's name in ``remote`` (set with it)

    def _remote(self) -> tuple[RemoteFolder, str] | None:
        """The remote copy's folder and name; None for a local release store."""
        if self.remote is None:
            return None
        if self.remote_name is None:
            raise ValueError("a remote journal place needs the journal's name")
        return self.remote, self.remote_name

    def fetch(self) -> None:
        """Bring the remote copy down (a dead worker's journal), unless a local one is already here."""
        remote = self._remote()
        if remote is None or self.path.exists() or not remote[0].exists(remote[1]):
            return
        make_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY_FILE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(remote[0].read_bytes(remote[1]))

    def upload(self) -> None:
        remote = self._remote()
        if remote is not None:
            remote[0].write_bytes(remote[1], self.path.read_bytes())

    def remove(self) -> None:
        """The release is stored: its journal is spent (the stored release is what a re-run reuses)."""
        self.path.unlink(missing_ok=True)
        remote = self._remote()
        if remote is not None and remote[0].exists(remote[1]):
            remote[0].fs.rm(remote[0]._path(remote[1]))


SELECTIONS = frozenset({"noisy_max", "noisy_top_k", "choice"})


def replay_summary(records: list[tuple[DrawCall, np.ndarray]]) -> str:
    """What a resume replays, in words (public: the number of noisy measurements and selections)."""
    selections = sum(call.kind in SELECTIONS for call, _ in records)
    return f"{len(records) - selections} noisy measurements and {selections} selections"


def _no_step(_: int) -> None:
    return None


class NoiseJournal:
    """An open journal: the records to replay, then appends. Holds an exclusive lock on its file, so two
    processes never draw one release at the same time (a second one is refused)."""

    def __init__(self, place: JournalPlace, header: JournalHeader, records: list[tuple[DrawCall, np.ndarray]],
                 fd: int, after_append: Callable[[int], None], resumed: bool = False) -> None:
        self.place = place
        self.header = header
        self.records = records
        self.resumed = resumed  # an earlier attempt's journal (possibly with no draw yet), not a new one
        self.replayed = 0
        self._fd = fd
        self._after_append = after_append

    @property
    def replaying(self) -> bool:
        return self.replayed < len(self.records)

    @staticmethod
    def open(place: JournalPlace, header: JournalHeader,
             after_append: Callable[[int], None] = _no_step) -> NoiseJournal:
        """Open (or create) the journal of ``header.release_key``. An existing journal of anything else
        (another format, release, purpose, sampler or seed) is refused with the reason, before any draw; its
        post-processing seed is kept. A torn last record is cut off."""
        place.fetch()
        make_private_dir(place.path.parent)
        fd = os.open(place.path, os.O_RDWR | os.O_CREAT, OWNER_ONLY_FILE)  # mode at creation, never a chmod
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise NoiseJournalError("another process is drawing this release now (its noise journal is locked); "
                                    "wait for it to end, then re-run the same command; nothing was drawn") from None
        try:
            payloads, good = unframe(_read_all(fd))
            if not payloads:  # new, or killed while its header was written: no draw can have happened yet
                os.ftruncate(fd, 0)
                _append(fd, encode({"header": asdict(header)}))
                place.upload()
                return NoiseJournal(place, header, [], fd, after_append)
            found = JournalHeader(**decode(payloads[0])[0].get("header", {}))
            different = found.differences(header)
            if different:
                raise NoiseJournalError(
                    f"the noise journal kept for this release was written by another {', '.join(different)} and is "
                    "never replayed; start a new run (a new release, charged again); nothing was drawn")
            if good < os.fstat(fd).st_size:
                os.ftruncate(fd, good)  # a torn append: its draw was never used
            records = []
            for payload in payloads[1:]:
                meta, array = decode(payload)
                if array is None:  # every record after the header is written with its result (append)
                    raise NoiseJournalError("a record of this release's noise journal holds no result; nothing was "
                                            "drawn")
                records.append((DrawCall.from_json(meta["call"]), array))
            return NoiseJournal(place, found, records, fd, after_append, resumed=True)
        except BaseException:
            os.close(fd)
            raise

    def replay(self, call: DrawCall) -> np.ndarray | None:
        """The recorded result of the next call, if the journal holds one; None once it is replayed in full.

        A call that is not the one recorded is refused: nothing new is drawn for a release whose earlier draws
        answered other questions."""
        if not self.replaying:
            return None
        recorded, result = self.records[self.replayed]
        if recorded != call:
            raise NoiseJournalError(
                f"the noise journal of this release does not match this run at draw {self.replayed + 1} (recorded "
                f"{recorded.kind}, asked {call.kind}): another code path or parameters; nothing new was drawn. "
                "Start a new run (a new release, charged again)")
        self.replayed += 1
        return result

    def append(self, call: DrawCall, result: np.ndarray) -> None:
        """Keep a fresh draw, durably, before it is used."""
        _append(self._fd, encode({"call": call.to_json()}, np.asarray(result)))
        self.place.upload()
        self.records.append((call, np.asarray(result)))
        self.replayed = len(self.records)
        self._after_append(len(self.records))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _append(fd: int, payload: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_END)
    data = frame(payload)
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)  # on the disk before the draw is used: a power loss is a kill too
