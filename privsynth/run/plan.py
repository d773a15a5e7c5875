"""The checked plan of a run: every parameter resolved and checked before any data is read and
before any budget is spent (the mechanism's own checks, resource limits, paths, URLs, credentials).
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from privsynth.engine.sources import SourceSpec, parse_source
from privsynth.errors import InfeasibleRequestError, ParameterError
from privsynth.io import InputError, check_writable_directory, parse_sink
from privsynth.mechanisms.base import MechanismConfig
from privsynth.mechanisms.catalogue import Mechanism, mechanism_config
from privsynth.mechanisms.catalogue import load as load_mechanism
from privsynth.privacy.accounting import PrivacyCost
from privsynth.run.fine_decoding import FineDecoding, default_share, plan_fine_decoding
from privsynth.run.parameters import RunParameters, bundled_example, describe_validation_error
from privsynth.schema import Schema, load_schema
from privsynth.schema.encoding import domain_of
from privsynth.schema.limits import check_schema_limits


@dataclass(frozen=True)
class DiscoveryPlan:
    """A run without a schema: discovery spends a share of the run's rho before the mechanism (which gets
    the rest). ``total`` is the whole run's cost, the (epsilon, delta) asked for; ``rho`` its zCDP part,
    ``share`` the discovery's share (None: by need, decided from the columns discovery must read)."""

    total: PrivacyCost
    rho: float
    share: float | None


@dataclass(frozen=True)
class RunPlan:
    """A validated run: everything resolved before the data is touched. Without a schema (``discovery``
    set), ``schema`` and the mechanism's config are filled by ``complete_plan`` after the discover stage."""

    parameters: RunParameters
    source: SourceSpec | None
    schema: Schema | None
    schema_path: str
    mechanism: Mechanism
    mechanism_config: MechanismConfig
    output: Path | None
    dataset: str
    cost: PrivacyCost
    bundled_example: bool = False
    fine_decoding: FineDecoding | None = None  # None: values uniform inside their bins
    discovery: DiscoveryPlan | None = None

    @property
    def delta(self) -> float:
        return self.parameters.delta

    @property
    def unlimited(self) -> bool:
        """Spending without a budget is explicit: asked for, or the bundled (public) example."""
        return self.parameters.unlimited or self.bundled_example


def plan_run(parameters: RunParameters, *, schema: Schema | None = None, in_memory: bool = False) -> RunPlan:
    """Resolve and check every parameter; raises ParameterError / InputError / SchemaError on the first problem.

    Everything that needs only the parameters, the schema and the (public) domain is checked here,
    before any data is read and before any budget is charged: the mechanism's own ``check_config``,
    the resource limits of ``privsynth.schema.limits``, paths, URLs and credentials. Without a schema
    (an input and no --schema) the run discovers one: the plan holds the whole run's cost, and the
    domain-dependent checks run in ``complete_plan`` once the schema is known.
    """
    example_input, example_schema = bundled_example()
    bundled = parameters.input is None and not in_memory
    schema_path = parameters.schema_file or (example_schema if bundled else None)
    if schema is None and schema_path is not None:
        schema = load_schema(schema_path)
    elif schema is not None:
        schema_path = parameters.schema_file or f"<schema {schema.name}>"
    if schema is not None:
        check_schema_limits(schema)
    source = None
    if not in_memory:
        source = parse_source(parameters.input or example_input)
        local = source.kind in ("csv", "parquet") and "://" not in source.location
        if local and any(ch in source.location for ch in "*?["):
            if not glob.glob(source.location):
                raise InputError(f"input {source.location!r} matches no file")
        elif local and not Path(source.location).is_file():
            raise InputError(f"input file {source.location!r} does not exist")
    mechanism = load_mechanism(parameters.mechanism)
    discovery = None
    if schema is not None and parameters.public:
        raise ParameterError("--public feeds the discovery of a run without --schema; with a schema, its file states "
                             "the public facts (draft one with `privsynth schema draft --public ...`)")
    if schema is None:
        discovery = plan_discovery(parameters)
        if parameters.public:  # a malformed or contradictory contract is refused before anything is read or charged
            from privsynth.discovery.contracts import read_public_sources

            read_public_sources(parameters.public, parameters.public_model, parameters.input,
                                trust_data_derived=parameters.trust_data_derived)  # rule 10: refused here too
        config, fine = _checked(parameters, lambda: (mechanism_config(mechanism, parameters.epsilon, parameters.delta,
                                                                      parameters.rows, _options(parameters, mechanism)),
                                                     None))
    else:
        config, fine = plan_mechanism(parameters, mechanism, schema, parameters.epsilon)
    if parameters.ledger is not None:
        check_ledger_url(parameters.ledger)
    check_delta_against_public_rows(parameters.delta, parameters.public_rows)
    if parameters.rows is None and not mechanism.caps_rows:
        if not mechanism.releases_n_estimate(config):
            raise ParameterError(f"--rows is required with mechanism {parameters.mechanism} and these options: its "
                                 "release carries no DP estimate of the row count")
    from privsynth.io.storage import is_remote

    output = (check_writable_directory(parameters.output) if parameters.output and not is_remote(parameters.output)
              else None)
    if parameters.sink:
        try:
            parse_sink(parameters.sink)  # the same parser write_sink uses, before any data is read
        except InputError as err:
            raise ParameterError(str(err).removeprefix("--")) from None
    if (parameters.audit_target is not None and schema is not None
            and parameters.audit_target not in [c.name for c in schema.kept_columns]):
        raise ParameterError(f"audit_target {parameters.audit_target!r} is not a kept column of schema {schema.name!r}")
    check_audit_location(parameters)
    if parameters.audit_target is not None and not parameters.audit:
        raise ParameterError("audit_target needs audit=True (--audit): "
                             "the train-on-synthetic score reads the real data")
    dataset = parameters.dataset or (schema.name if schema is not None else default_dataset(parameters))
    cost = (discovery.total if discovery is not None
            else fine.total if fine is not None else mechanism.privacy_cost(config))
    return RunPlan(parameters=parameters, source=source, schema=schema,
                   schema_path=str(schema_path) if schema_path else "<discovered by this run>", mechanism=mechanism,
                   mechanism_config=config, output=output, dataset=dataset, cost=cost, bundled_example=bundled,
                   fine_decoding=fine, discovery=discovery)


def default_dataset(parameters: RunParameters) -> str:
    """The ledger's dataset of a run without a schema: the input's table or file name (a schema's name)."""
    from privsynth.discovery import default_name

    return default_name(parameters.input) if parameters.input else "dataframe"


def run_rho_with_discovery(epsilon: float, delta: float) -> float:
    """The whole run's rho when it discovers its schema: the largest that fits (epsilon, delta less the
    categorical thresholds' share of it)."""
    from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION
    from privsynth.privacy.spending import rho_allowance

    return rho_allowance(epsilon, delta * (1.0 - THRESHOLD_DELTA_FRACTION))


def plan_discovery(parameters: RunParameters) -> DiscoveryPlan:
    """The whole run's cost when it discovers its schema: rho-zCDP for (epsilon, delta minus the categorical
    thresholds' delta), so the thresholds' delta stays inside the stated delta."""
    from privsynth.discovery.categories import THRESHOLD_DELTA_FRACTION

    delta = parameters.delta
    rho = run_rho_with_discovery(parameters.epsilon, delta)
    total = PrivacyCost.zcdp(rho, f"run with discovery: {rho:.6g}-zCDP in all (discovery, then the mechanism)",
                             (f"categorical thresholds: at most {THRESHOLD_DELTA_FRACTION * delta:.3g} of delta, "
                              "inside the stated delta",), extra_delta=THRESHOLD_DELTA_FRACTION * delta)
    return DiscoveryPlan(total, rho, parameters.discovery_share)


def complete_plan(plan: RunPlan, schema: Schema, spent_rho: float) -> RunPlan:
    """The plan of a run whose schema was discovered: the mechanism gets the run's rho less what discovery
    spent, as an epsilon at the run's delta; every domain-dependent check runs now."""
    from dataclasses import replace

    from privsynth.privacy.accounting import epsilon_from_rho

    assert plan.discovery is not None
    check_schema_limits(schema)
    left = plan.discovery.rho - spent_rho
    if left <= 0:
        raise ParameterError("discovery spent the whole budget; lower discovery_share")
    epsilon = epsilon_from_rho(left, plan.delta)
    config, fine = plan_mechanism(plan.parameters, plan.mechanism, schema, epsilon)
    cost = fine.total if fine is not None else plan.mechanism.privacy_cost(config)
    if cost.pure_epsilon is not None:
        # A pure eps-DP mechanism composes with discovery's zCDP as rho = eps^2 / 2: the eps whose rho is
        # what is left (epsilon_from_rho(left) would be an (eps, delta) figure, far above it as pure eps).
        config, fine = plan_mechanism(plan.parameters, plan.mechanism, schema, math.sqrt(2.0 * left))
        cost = fine.total if fine is not None else plan.mechanism.privacy_cost(config)
    return replace(plan, schema=schema, mechanism_config=config, fine_decoding=fine, cost=cost)


def _options(parameters: RunParameters, mechanism: Mechanism) -> dict:
    options = dict(parameters.mechanism_options)
    if mechanism.public_rows_option is not None and parameters.public_rows is not None:
        options.setdefault(mechanism.public_rows_option, parameters.public_rows)
    return options


def _checked(parameters: RunParameters, make):
    """``make()``, with the mechanism's config errors as ParameterError naming the mechanism."""
    try:
        return make()
    except ValidationError as err:
        raise ParameterError(describe_validation_error(err,
                                                       prefix=f"mechanism {parameters.mechanism} option ")) from None
    except TypeError as err:
        raise ParameterError(f"mechanism {parameters.mechanism}: {err}") from None
    except InfeasibleRequestError:
        raise
    except ValueError as err:
        raise ParameterError(f"mechanism {parameters.mechanism}: {err}") from None


def plan_mechanism(parameters: RunParameters, mechanism: Mechanism, schema: Schema,
                   epsilon: float) -> tuple[MechanismConfig, FineDecoding | None]:
    """(config, fine decoding) of the mechanism at ``epsilon`` for ``schema``'s domain, every config check run."""
    options = _options(parameters, mechanism)

    def make():
        domain = domain_of(schema)

        def build(eps: float):
            built = mechanism_config(mechanism, eps, parameters.delta, parameters.rows, options)
            return mechanism.configure_for(built, domain)

        # the mechanism's share of the budget, and the fine-decoding measurement's (the total unchanged)
        share = parameters.fine_decoding if parameters.fine_decoding is not None else default_share(schema)
        config, fine = plan_fine_decoding(schema, share, epsilon, parameters.delta, build, mechanism.privacy_cost)
        mechanism.check_config(config, domain)
        if mechanism.check_feasible is not None:
            mechanism.check_feasible(config)
        return config, fine

    return _checked(parameters, make)


def check_ledger_url(url: str) -> None:
    """The ledger URL parses as a SQLAlchemy URL (the value is not echoed: it may hold a password)."""
    import sqlalchemy as sa

    try:
        sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        raise ParameterError("ledger: not a SQLAlchemy URL; expected e.g. sqlite:////path/ledger.sqlite or "
                             "postgresql+psycopg://user@host/db") from None


def check_audit_location(parameters: RunParameters) -> None:
    """Where the internal (not DP) audit may go, checked before the charge.

    A remote run folder is shared storage for public files: the audit is never uploaded beside them, so
    ``--audit`` with a remote ``--output`` needs ``--audit-location`` (a private place the owner names).
    A local audit location that others can read is refused rather than narrowed after the fact.
    """
    import os
    import stat

    from privsynth.io.storage import is_remote

    location = parameters.audit_location
    if location is None:
        if parameters.audit and parameters.output and is_remote(parameters.output):
            raise ParameterError("--audit with a remote --output: the internal audit (not DP) is never uploaded beside "
                                 "the public files; name a private folder for it with --audit-location")
        return
    if not parameters.audit:
        raise ParameterError("--audit-location needs --audit")
    if ".." in Path(location).parts or ".." in location.split("/"):
        raise ParameterError("audit_location: '..' is not allowed")
    if not is_remote(location) and Path(location).exists():
        mode = stat.S_IMODE(os.stat(location).st_mode)
        if mode & 0o077:
            raise ParameterError(f"audit_location {location!r} is readable by other users (mode {mode:o}); "
                                 "use an owner-only folder (chmod 700) or a new one (created 0700)")


def check_delta_against_public_rows(delta: float, public_rows: int | None) -> None:
    """delta must be below 1/n, checked against a PUBLIC row count only (``--public-rows``), before any data.

    A larger delta allows releasing a whole record outright, but n is private: a refusal that read the
    exact n would make whether a release exists depend on it, and bisecting ``--delta`` would give n
    for free. So the check reads only what the user declared public; without it, the release's DP
    estimate of n is compared afterwards (``delta_row_note``), which informs and never gates.
    """
    if not math.isfinite(delta):
        raise ParameterError("delta must be finite")
    if public_rows is not None and not delta < 1.0 / public_rows:
        raise ParameterError(f"delta {delta:g} is not below 1/n for the declared --public-rows {public_rows}; "
                             "pick a --delta well below 1/n, e.g. 1e-9; nothing was charged")


def delta_row_note(delta: float, n_estimate: float | None) -> str | None:
    """A warning when delta is not well below 1/n_hat, n_hat the release's DP estimate (post-processing).

    Computed after the release from DP outputs only: it is written to privacy.json, it never refuses.
    """
    if n_estimate is None or not math.isfinite(n_estimate) or n_estimate <= 0:
        return None
    if delta * n_estimate < 1.0:
        return None
    return (f"delta {delta:g} is not below 1/n for the release's DP estimate of n ({n_estimate:.0f}): a delta "
            "this large allows a release that exposes a record outright; use a delta well below 1/n, e.g. 1e-9")
