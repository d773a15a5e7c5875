"""The draft as commented YAML: each column's entry with comments saying what is public and what is DP."""

from __future__ import annotations

from typing import Any

import yaml

from privsynth.discovery.budget import split_lines
from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
from privsynth.discovery.contract_trust import derived_header
from privsynth.discovery.draft import ColumnDraft, DraftOptions
from privsynth.privacy.accounting import PrivacyCost, epsilon_from_rho
from privsynth.schema.stored import stored_form

INTERNAL_KEYS = ("settled",)


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**9,
                          allow_unicode=True).strip().removesuffix("...").strip()


DRAFT_TITLE = "DRAFT SCHEMA, written by `privsynth schema draft`: a file for a human to review and edit."


def _header(drafts: list[ColumnDraft], options: DraftOptions, origin: str, text_source: bool,
            cost: PrivacyCost | None, dataset: str | None, title: str) -> list[str]:
    head = [
        f"# {title}",
        f"# Source: {origin}",
    ]
    if text_source:
        head.append("# CSV declares no types: its columns were read as text, never sniffed; each type below is "
                    "PUBLIC (your flags, a contract) or decided under DP (dp_released: [type]), else a TODO.")
    else:
        head.append("# Column types are the source's DECLARED types (metadata only).")
    if options.peek_without_dp:
        head += ["# " + "!" * 98,
                 "# NOT DIFFERENTIALLY PRIVATE: --peek-without-dp read the exact values. The categories, bounds and",
                 "# bins below come from the private rows and LEAK them. Do not share this file; replace them",
                 "# with public values from documentation before any private run.",
                 "# " + "!" * 98]
    elif cost is None:
        head += ["# No value of the table was read: fill every TODO (categories, bounds, bins) from public",
                 "# documentation. Until then `privsynth run` refuses this file and names the column."]
    else:
        # The Gaussian part is held to delta * (1 - F) whenever thresholds may run (draft_cost, plan_discovery):
        # its epsilon there, with the thresholds' F * delta, is the true (epsilon, delta) statement.
        eps = epsilon_from_rho(cost.rho, options.delta * (1.0 - THRESHOLD_DELTA_FRACTION))
        head += [(f"# DP PASS: the values marked dp_released below are differentially private: (epsilon {eps:.4g}, "
                 f"delta {options.delta:g})-DP in total, rho {cost.rho:.6g}-zCDP, charged to dataset {dataset!r} in "
                 "the budget ledger before any value was read. Values not marked are PUBLIC (your flags, the "
                 "declared types)."),
                 (f"# The categorical thresholds use at most {THRESHOLD_DELTA_FRACTION * options.delta:.3g} of that "
                 "delta (a value seen in one row is released with at most that probability); the rest is the "
                 "Gaussian part's."),
                 "# They are data-dependent (DP) metadata: prefer public documentation where it exists.",
                 ("# Drafted categorical columns map every unlisted value to <out-of-domain>; drafted numeric and "
                 "temporal columns clip values outside their bounds: the run accepts the file as written.")]
        spent = {d.column.name: d.spent for d in drafts if d.spent}
        from privsynth.discovery.discover import what_the_budget_finds

        head += ["# At this budget, " + what_the_budget_finds(
            cost.rho, len(spent), THRESHOLD_DELTA_FRACTION * options.delta / max(len(spent), 1)) + "."]
        head += ["# " + line for line in split_lines(spent, cost.rho)]
    head.append("# Identifier-like and free-text columns (by name) are proposed drop: true; their values were never "
                "read.")
    head += ["# " + line for line in derived_header(options.public_facts())]  # rule 10: the owner's word, marked
    return head


def with_storage(d: ColumnDraft, declared_storage: bool = True) -> dict[str, Any]:
    """A column's entry with the source's storage type (``stored_as``) where it is not the pipeline's own: the
    declared type (metadata, public), never read from the rows; none where the source declares no storage
    (``declared_storage``: a pandas frame's dtypes follow its values). A text column's form is its ``format``."""
    entry = d.entry
    if not declared_storage or entry.get("drop") or d.stored == "text" or "format" in entry or "stored_as" in entry:
        return entry
    form = stored_form(d.column.declared, str(entry.get("type")))
    return entry if form is None else {**entry, "stored_as": form}


def render(drafts: list[ColumnDraft], options: DraftOptions, origin: str, text_source: bool,
           cost: PrivacyCost | None, dataset: str | None, title: str = DRAFT_TITLE,
           declared_storage: bool = True) -> str:
    """The draft as commented YAML: valid YAML; loads as a Schema once every TODO is filled. ``declared_storage``:
    whether the source's declared types are its storage types (``with_storage``)."""
    lines = _header(drafts, options, origin, text_source, cost, dataset, title)
    lines += [f"name: {_scalar(options.name)}", "other_columns: fail", "columns:"]
    for d in drafts:
        lines.append("")
        for comment in d.comments:
            lines.append(f"  # {comment}")
        first = True
        for key, value in with_storage(d, declared_storage).items():
            if key in INTERNAL_KEYS:
                continue
            prefix = "  - " if first else "    "
            first = False
            text = "null" if value is None else _scalar(value)
            suffix = ("  # TODO" if value is None or value == [] and key == "categories" and not d.entry.get("drop")
                      else "")
            lines.append(f"{prefix}{key}: {text}{suffix}")
    return "\n".join(lines) + "\n"
