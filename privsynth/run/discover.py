"""The discover stage: a schema for a table that comes without one, under DP, inside the run's budget.

Public facts come first (the source's declared types, ``--public`` data contracts); what they leave
is discovered by ``privsynth.discovery`` (the code path of ``privsynth schema draft --epsilon``): DP
column facts (type, whole numbers, identifiers), categories by thresholded noisy counts, bounds and
edges or coded values from noisy histograms. The stage charges its share of the run's rho to the
ledger BEFORE any value is read, claims the draw (every draw is kept in the release store's noise journal
as it is drawn, so a discovery killed half-way resumes where it stopped, charged once), and writes ``schema.yaml``
(every DP fact marked with its cost) and ``discovery.json`` (public: what was spent, per column what was decided and the
DP share of its values that fell outside the discovered domain). A resumed run reuses its folder's
``schema.yaml`` without a new charge; a later run may pass it as ``--schema`` at no cost.

Guarantee: discovery is rho_d-zCDP (Gaussian measurements, L2 sensitivity 1 each, composed
adaptively) plus the categorical thresholds' delta, which the run's plan keeps inside its delta; the
mechanism gets the run's rho less rho_d, so the whole run is (epsilon, delta)-DP as asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from privsynth.discovery.beyond import BeyondBounds
from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
from privsynth.discovery.public import PublicFacts
from privsynth.errors import ParameterError
from privsynth.io import atomic_write_bytes, atomic_write_json
from privsynth.privacy.accounting import PrivacyCost
from privsynth.run.storage import declares_storage
from privsynth.schema import Schema, parse_schema

SHARE_PER_COLUMN = 0.03  # discovery's share of the run's rho per column it reads (by need) ...
# ... at least this much of it (a narrow table's few marginals need little; misplaced bounds cost more) ...
MIN_SHARE = 0.2
MAX_SHARE = 0.35  # ... at most this much of it


@dataclass(frozen=True)
class DiscoveryOutcome:
    """What the discover stage decided and spent (public: DP results and schema facts only)."""

    schema: Schema
    rho: float
    share: float
    columns_read: tuple[str, ...]
    dropped: tuple[str, ...]
    out_of_domain: tuple[tuple[str, float], ...]  # per categorical column: DP share of present values outside
    reused: bool = False
    # per numeric or temporal column with DP bounds: the DP estimate of its present values beyond them (clipped
    # into its edge bins); post-processing of the bounds' noisy histograms (``discovery.bounds.beyond_bounds``)
    beyond_bounds: tuple[tuple[str, BeyondBounds], ...] = ()
    # per categorical column: its categories' noisy counts and their noise (category, count, sigma), DP outputs
    # the mechanism joins with its own 1-way measurements (``run.earlier_counts``)
    category_counts: tuple[tuple[str, tuple[tuple[str, float, float], ...]], ...] = ()

    def counts_by_column(self) -> dict[str, dict[str, tuple[float, float]]]:
        return {name: {value: (count, sigma) for value, count, sigma in held} for name, held in self.category_counts}

    def to_json(self) -> dict:
        return {"visibility": "public (DP)", "rho": self.rho, "share_of_run": self.share,
                "columns_read": list(self.columns_read), "dropped": list(self.dropped),
                "out_of_domain_share_dp": dict(self.out_of_domain),
                "beyond_bounds_dp": {name: b.to_json() for name, b in self.beyond_bounds},
                "category_counts_dp": {name: {value: [count, sigma] for value, (count, sigma) in held.items()}
                                       for name, held in self.counts_by_column().items()},
                "reused_from_run_folder": self.reused}


def discovery_share(requested: float | None, columns_read: int) -> float:
    """Discovery's share of the run's rho: the requested one, else by need (SHARE_PER_COLUMN per column read,
    between MIN_SHARE and MAX_SHARE). A narrow table's mechanism measures few marginals, each with much of the
    budget: a fifth less of it moves their noise by about a tenth, while a column's bounds read at three times
    the noise cut its tails (clipped values, the largest error of a narrow table without documentation)."""
    if requested is not None:
        return requested
    return min(MAX_SHARE, max(MIN_SHARE, SHARE_PER_COLUMN * columns_read))


def public_facts(parameters) -> PublicFacts:
    """The run's public facts from its ``--public`` contracts (none: empty)."""
    if not parameters.public:
        return PublicFacts()
    from privsynth.discovery.contracts import read_public_sources

    return read_public_sources(parameters.public, parameters.public_model, parameters.input,
                               trust_data_derived=parameters.trust_data_derived)


def stage_discover(ctx) -> DiscoveryOutcome:
    """Discover the run's schema (module docstring); the run goes on with ``ctx.with_discovery(outcome)``."""
    if ctx.folder.trusted("schema.yaml"):
        schema = parse_schema(yaml.safe_load(ctx.folder.file("schema.yaml").read_text(encoding="utf-8")),
                              origin="schema.yaml")
        spent = float(ctx.folder.manifest["stages"].get("discover", {}).get("discovery_rho", 0.0))
        ctx.progress("discover: reused this run folder's schema.yaml; nothing charged")
        return reused_outcome(ctx, schema, spent, spent / ctx.plan.discovery.rho)
    return _discover(ctx)


def reused_outcome(ctx, schema: Schema, rho: float, share: float) -> DiscoveryOutcome:
    """A resumed run's discovery from its folder: schema.yaml, and discovery.json's DP facts where it was
    recorded (the out-of-domain and beyond-bounds estimates the report states; public, DP)."""
    found: dict = {}
    if ctx.folder.trusted("discovery.json"):
        import json

        found = json.loads(ctx.folder.file("discovery.json").read_text(encoding="utf-8"))
    return DiscoveryOutcome(schema, rho, share, tuple(found.get("columns_read", ())), tuple(found.get("dropped", ())),
                            tuple((c, float(v)) for c, v in (found.get("out_of_domain_share_dp") or {}).items()),
                            reused=True,
                            beyond_bounds=tuple((c, BeyondBounds.from_json(b))
                                                for c, b in (found.get("beyond_bounds_dp") or {}).items()),
                            category_counts=category_counts_of_json(found.get("category_counts_dp") or {}))


def category_counts_of_json(data: dict) -> tuple[tuple[str, tuple[tuple[str, float, float], ...]], ...]:
    """``DiscoveryOutcome.category_counts`` from discovery.json's ``category_counts_dp`` (a resumed run joins the
    counts its discovery drew)."""
    return tuple((str(name), tuple((str(value), float(pair[0]), float(pair[1])) for value, pair in held.items()))
                 for name, held in data.items())


def _discover(ctx) -> DiscoveryOutcome:
    from privsynth.discovery import default_name
    from privsynth.discovery.declared import declared_columns, open_declared
    from privsynth.discovery.discover import measure, what_the_budget_finds
    from privsynth.discovery.dp_pass import to_read
    from privsynth.discovery.draft import DraftOptions, Need, declared_drafts, needs
    from privsynth.discovery.writer import render
    from privsynth.privacy.charged import charge_then_noise
    from privsynth.privacy.keys import release_key

    plan, parameters = ctx.plan, ctx.plan.parameters
    name = default_name(parameters.input) if parameters.input else plan.dataset
    options = DraftOptions(name=name, epsilon=parameters.epsilon, delta=parameters.delta, dataset=plan.dataset,
                           ledger=parameters.ledger, require_budget=not plan.unlimited, seed=parameters.seed,
                           allow_seed_with_budget=parameters.allow_seed_with_budget,
                           public=public_facts(parameters))
    from privsynth.run.charge import resume_line
    from privsynth.run.faults import draw_point, fault_point

    opened, text_source = open_declared(ctx.data)
    journal = None
    try:
        drafts = declared_drafts(declared_columns(opened.table), options, text_source)
        read = to_read(drafts, options)
        share = discovery_share(plan.discovery.share, len(read)) if read else 0.0
        rho = share * plan.discovery.rho
        n_thresholds = max(1, len(read))
        if read:
            from privsynth.discovery.discover import check_budget_finds_values
            from privsynth.run.plan import run_rho_with_discovery

            def discovery_rho(epsilon: float) -> float:  # ``rho`` above, at another epsilon
                return share * run_rho_with_discovery(epsilon, parameters.delta)

            categorical = sum(1 for d in read if needs(d, options) in (Need.FACTS, Need.CATEGORIES))
            if categorical:
                check_budget_finds_values(discovery_rho, parameters.epsilon, len(read), categorical,
                                          THRESHOLD_DELTA_FRACTION * parameters.delta / n_thresholds,
                                          parameters.public_rows, "the run's discover stage")
            secret = ctx.ledger.release_secret()
            key = release_key(secret, "discovery", "no-schema", "discovery", {"columns": [d.column.name for d in read],
                                                                     "rho": rho}, parameters.seed, ctx.run_id)
            # approximate zCDP: the categorical thresholds' delta (at most THRESHOLD_DELTA_FRACTION of delta)
            cost = PrivacyCost.zcdp(rho, f"discovery: {rho:.6g}-zCDP (DP column facts, categories, bounds, edges)",
                                    extra_delta=THRESHOLD_DELTA_FRACTION * parameters.delta)
            ctx.progress("discover: " + what_the_budget_finds(
                rho, len(read), THRESHOLD_DELTA_FRACTION * parameters.delta / n_thresholds))
            journal = ctx.store.journal_place(key)  # every draw kept as drawn: a killed discovery resumes (5.3)
            noise, _ = charge_then_noise(ctx.ledger, plan.dataset, key, cost, "discovery (the run's schema)",
                                         require_budget=not plan.unlimited, seed=parameters.seed, journal=journal,
                                         after_draw=lambda n: fault_point(draw_point("discovery", n)))
            draws = noise.journal
            if draws is None:  # charge_then_noise attaches the journal it is given
                raise RuntimeError("the discovery's noise source has no journal")
            line = resume_line(noise, ctx.run_id, "discover")
            if line is not None:
                ctx.progress(line)
            try:
                measure(opened.table, read, options, rho, THRESHOLD_DELTA_FRACTION * parameters.delta / n_thresholds,
                        noise)
            finally:
                draws.close()
        text = render(drafts, options, opened.description, text_source,
                      PrivacyCost.zcdp(rho, "discovery") if read else None, plan.dataset,
                      title=f"SCHEMA DISCOVERED by run {ctx.run_id} (its discover stage); reusable as --schema at "
                            "no new cost.", declared_storage=declares_storage(ctx.data))
    finally:
        opened.close()
    kept = [d for d in drafts if not d.entry.get("drop")]
    if not kept:
        raise ParameterError("discovery kept no column of the input (each one's reason is in the drafted entries): "
                             "give public facts (--public, or a schema written from documentation)")
    schema = parse_schema(yaml.safe_load(text), origin="the discovered schema")
    atomic_write_bytes(ctx.folder.file("schema.yaml"), text.encode())
    outcome = DiscoveryOutcome(schema, rho, share, tuple(d.column.name for d in read),
                               tuple(d.column.name for d in drafts if d.entry.get("drop")),
                               tuple((d.column.name, round(d.ood_share, 4)) for d in drafts if d.ood_share is not None),
                               beyond_bounds=tuple((d.column.name, d.beyond) for d in kept if d.beyond is not None),
                               category_counts=tuple(
                                   (d.column.name, tuple((v, c, s) for v, (c, s) in sorted(d.category_counts.items())))
                                   for d in kept if d.category_counts))
    atomic_write_json(ctx.folder.file("discovery.json"), outcome.to_json())
    ctx.folder.record("discover", ["schema.yaml", "discovery.json"], discovery_rho=rho)
    if journal is not None:
        journal.remove()  # the recorded schema.yaml is what a re-run reuses now
    from privsynth.discovery.contract_trust import derived_notice

    if (notice := derived_notice(options.public)) is not None:
        ctx.progress(f"discover: {notice}")  # rule 10: once, for facts the owner accepted as public
    ctx.progress(f"discover: {len(schema.kept_columns)} columns kept, {len(outcome.dropped)} dropped; "
                 f"{100 * share:.0f}% of the run's budget (rho {rho:.4g}) spent on the domain")
    for column, ood in outcome.out_of_domain:
        if ood >= 0.01:
            ctx.progress(f"discover: about {100 * ood:.0f}% of column {column!r} falls outside its DP categories "
                         f"(<out-of-domain>); public categories (--public, or a schema) would keep them")
    return outcome
