"""Rule 10 (docs/design.md 5.10): a contract that looks data-derived is read as public only on the owner's word.

A data contract is public only if it was written from documentation. Some are not:

* a Great Expectations suite that a profiler or a data assistant made (GX 0.x ``BasicDatasetProfiler``,
  ``UserConfigurableProfiler``, rule-based profilers, the onboarding data assistant): its value sets
  are the observed distinct values and its ranges the observed min and max, exactly;
* a database catalogue's ENUM labels (``CREATE TYPE t AS ENUM (SELECT DISTINCT c FROM ...)``) and CHECK
  values (a range written from the observed min and max): the catalogue cannot say who wrote them.

Each reader marks the facts it cannot vouch for (``PublicColumn.derived``: ``gx_profiler_entry`` here
for GX, ``catalogue`` for ENUM labels and CHECK values). ``accepted`` then REFUSES a source with such
facts (``DataDerivedContractError``, one line naming the contract, the entry and the option) unless
the owner passed ``--trust-data-derived-contracts`` (``trust_data_derived=True``); with it the facts are
used, their origins in the written schema say DATA-DERIVED, the schema's header lists them and the
console says once that the DP guarantee does not cover what they reveal.

Guarantee: without the option, whether a source is refused depends only on the contract's own
structure (its meta keys, the catalogue's kinds of constraints), never on a value of the rows or of
the contract, and nothing is read from the rows or charged before the refusal. With it, privsynth's
guarantee covers everything the run measures, and NOT what the accepted facts reveal about the rows.
Declared storage types (a Parquet footer, a catalogue's column types) and NOT NULL are structure, read
without the option; a CSV is read as text and no reader's inferred type is used (``declared``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privsynth.discovery.public import PublicFacts, derived_facts
from privsynth.errors import DataDerivedContractError

TRUST_FLAG = "--trust-data-derived-contracts"
TRUST_API = "trust_data_derived=True"

# words that name a data-profiling tool in a GX suite's meta (keys and citation comments), lower case
_PROFILER_WORDS = ("profiler", "data_assistant", "dataassistant", "data assistant")
# what a GX citation records when the suite was built by looking at a batch of data
_CITATION_DATA_KEYS = ("profiler_config", "batch_request", "batch_definition", "batch_spec", "batch_kwargs",
                       "batch_markers", "batch_parameters")


def _names_profiler(text: Any) -> bool:
    lowered = str(text).lower().replace("-", "_")
    return any(word in lowered for word in _PROFILER_WORDS)


def gx_profiler_entry(doc: Mapping[str, Any]) -> str | None:
    """The first entry of a GX suite (1.x or 0.x) that says it was made from data, or None.

    Read in order: a suite ``meta`` key naming a profiler or data assistant (``UserConfigurableProfiler``,
    ``BasicSuiteBuilderProfiler``, ``profiler_config``, ``onboarding_data_assistant``); a ``meta.citations``
    entry holding a profiler configuration or a batch it was built from (``batch_request``,
    ``batch_kwargs``, ...), or whose comment names a profiler or data assistant; an expectation whose own
    ``meta`` names one (``profiler_details``, ``BasicDatasetProfiler``). Only keys and the citations'
    comments are read: the answer never depends on a value the suite states."""
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        meta = {}
    for key in meta:
        if _names_profiler(key):
            return f"meta.{key}"
    citations = meta.get("citations")
    for i, citation in enumerate(citations if isinstance(citations, list) else []):
        if not isinstance(citation, Mapping):
            continue
        for key in _CITATION_DATA_KEYS:
            if citation.get(key):
                return f"meta.citations[{i}].{key}"
        if _names_profiler(citation.get("comment", "")):
            return f"meta.citations[{i}].comment"
    expectations = doc.get("expectations")
    for i, expectation in enumerate(expectations if isinstance(expectations, list) else []):
        e_meta = expectation.get("meta") if isinstance(expectation, Mapping) else None
        for key in e_meta if isinstance(e_meta, Mapping) else ():
            if _names_profiler(key):
                return f"expectation {i} meta.{key}"
    return None


def refusal(source: str, column: str, fact: str, why: str) -> DataDerivedContractError:
    """The one-line refusal of a possibly data-derived fact: the contract, the entry, the option."""
    return DataDerivedContractError(
        f"--public {source!r}: column {column!r}: its {fact} may be data-derived ({why}); a fact computed from "
        f"the rows is not public and the DP guarantee would not cover it: write the facts from documentation, "
        f"or pass {TRUST_FLAG} ({TRUST_API}) to read them as public on your word")


def accepted(facts: PublicFacts, source: str, trust_data_derived: bool) -> PublicFacts:
    """``facts`` of one ``--public`` source, if they may be used: a source with a possibly data-derived fact
    is refused (the first one named) unless the owner trusts it (module docstring)."""
    found = derived_facts(facts)
    if found and not trust_data_derived:
        raise refusal(source, *found[0])
    return facts


def derived_notice(facts: PublicFacts) -> str | None:
    """The console's one line when accepted facts may be data-derived (None: there are none)."""
    found = derived_facts(facts)
    if not found:
        return None
    listed = ", ".join(f"{column} {fact}" for column, fact, _ in found)
    return (f"WARNING: {len(found)} public fact(s) may be data-derived and were read as public on your word "
            f"({TRUST_FLAG}): {listed}. The DP guarantee does not cover what these facts reveal about the rows; "
            "the schema marks each one DATA-DERIVED")


def derived_header(facts: PublicFacts) -> list[str]:
    """The written schema's header lines listing the accepted data-derived facts (empty: none)."""
    found = derived_facts(facts)
    if not found:
        return []
    lines = ["DATA-DERIVED PUBLIC FACTS: the contracts below may have been computed from the rows; the owner "
             f"accepted them as public ({TRUST_FLAG}). The DP guarantee does NOT cover what they reveal:"]
    lines += [f"  {column}: {fact} ({why})" for column, fact, why in found]
    return lines
