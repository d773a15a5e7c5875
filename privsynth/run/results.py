"""What the stages hand each other: frozen, typed results (JSON only where an artifact is written).

Each stage takes the results it needs and returns its own; none passes state by changing the run's context.
The documents a stage writes (privacy.json, report.json, the internal audit) travel inside their result
read-only (``frozen_json``), so a later stage reads what was written and cannot change it; ``to_json`` gives
a fresh, plain copy for whoever writes or hands it on (the Python API's ``Release``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Self


def frozen_json(value: Any) -> Any:
    """A JSON value made read-only all the way down: objects become mapping proxies, arrays tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): frozen_json(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen_json(v) for v in value)
    return value


def thawed_json(value: Any) -> Any:
    """The plain (dict and list) copy of a ``frozen_json`` value, for writing and for callers."""
    if isinstance(value, Mapping):
        return {k: thawed_json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed_json(v) for v in value]
    return value


@dataclass(frozen=True)
class ValidationResult:
    """The validate stage passed the input's structure (a failure raises instead of returning).

    drop_faulty_records: records failing an expectation are left out of every statistic (the default policy, a
    per-record map the guarantee covers); False only where the owner asked to refuse on one and none failed.
    """

    drop_faulty_records: bool


@dataclass(frozen=True)
class BinarisedStatistics:
    """The binarise stage's private histogram of level codes (in the run's owner-only temporary folder) and
    which records it counts."""

    path: Path
    drop_faulty_records: bool


@dataclass(frozen=True)
class WrittenDocument:
    """A JSON artifact a stage wrote, held read-only (``frozen_json``) for the stages after it."""

    document: Mapping[str, Any]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Self:
        return cls(frozen_json(document))

    def to_json(self) -> dict:
        return thawed_json(self.document)


@dataclass(frozen=True)
class PrivacyRecord(WrittenDocument):
    """privacy.json as the later stages read it: what was charged and spent, and the release's DP facts."""

    @property
    def mechanism(self) -> str:
        return str(self.document["mechanism"])

    @property
    def reused(self) -> bool:
        """The run reused its stored release: nothing was charged or drawn again."""
        return bool(self.document.get("reused_stored_release"))

    @property
    def exact_release(self) -> bool:
        """The release is the records themselves (private sampling): published as drawn, never resampled."""
        return bool(self.document.get("exact_release"))

    @property
    def n_estimate(self) -> float | None:
        """The release's own DP estimate of the row count (never the private n), when the mechanism gives one."""
        estimate = (self.document.get("release_facts") or {}).get("n_estimate")
        return None if estimate is None else float(estimate)

    @property
    def caveat(self) -> str | None:
        return self.document.get("caveat")

    @property
    def epsilon_statement(self) -> str | None:
        return self.document.get("epsilon_statement")

    def total_cost(self) -> Mapping[str, Any]:
        """The whole run's spend: ``spent`` (every stage together), else the mechanism's ``cost`` (a file from
        before the run's figure was written first)."""
        return self.document.get("spent") or self.document["cost"]

    def epsilon(self) -> float | None:
        """The epsilon the run spent at its delta, all stages together."""
        spent = self.document.get("spent")
        if spent:
            return spent.get("epsilon")
        return self.document["cost"].get("epsilon_at_delta")

    def spend_line(self) -> str:
        """The run's one line (the console's, report.md's, `privsynth budget show`'s)."""
        from privsynth.report.dp_report import run_spend_line

        return str(run_spend_line(self.document))


@dataclass(frozen=True)
class RoundingFacts:
    """The rounding stage's public facts: rows written, whether the synthetic table passed its own schema's
    suite, and the sink it was also written to."""

    rows: int
    synthetic_valid: bool
    sink: str | None = None

    def to_json(self) -> dict:
        facts: dict = {"rows": self.rows, "synthetic_valid": self.synthetic_valid}
        if self.sink is not None:
            facts["sink"] = self.sink
        return facts


@dataclass(frozen=True)
class ReportResult(WrittenDocument):
    """report.json as written (public: built from the release only)."""

    @property
    def summary(self) -> dict | None:
        """The report's headline figures, as a plain copy."""
        found = self.document.get("summary")
        return None if found is None else thawed_json(found)


@dataclass(frozen=True)
class AuditResult:
    """The INTERNAL (not DP) audit: where it was written and what it holds; never published."""

    location: str
    document: Mapping[str, Any]

    @classmethod
    def of(cls, location: str, document: Mapping[str, Any]) -> AuditResult:
        return cls(location, frozen_json(document))

    def to_json(self) -> dict:
        return {**thawed_json(self.document), "location": self.location}
