"""What an AIM run will cost, from public facts only: the config, the domain's level counts, and a
declared public row count if there is one (never the private n or the data).

``forecast_cost(config, domain)`` is pure and cheap; ``mechanism.check_config`` calls it before the
budget is charged and refuses a run whose forecast passes ``max_seconds`` or ``max_memory_gb``.

The work is capped by construction: at most ``schedule.rounds_cap`` rounds (the budget schedule
without annealing, ``schedule.largest_schedule``, gives the most rounds and the rho spent after each);
in round t the junction tree holds at most ``max_model_size_mb * rho_spent(t) / rho`` MB (AIM's own
size rule; never more than the whole domain); each fit runs at most ``iterations_per_round``
mirror-descent steps, each a pass over the tree; each round scores at most ``max_candidates``
candidates; the final fit runs ``final_iterations`` steps on the final tree.

Time model (seconds on the 2-core benchmark machine, see ``COEFFICIENTS``):
    fit step    = FIT_STEP + FIT_CELL * tree cells + FIT_MEASUREMENT * measurements so far
    selection   = SELECT_CANDIDATE * candidates scored + SELECT_CELL * tree cells   (per round)
    counting    = COUNT_RECORD * distinct records * covering passes   (only with a public row count)
    sampling    = SAMPLE_CELL * rows drawn * attributes
``seconds`` is a planning figure: every round the schedule allows, the tree at ``TREE_FILL`` of the
size the rule allows, every step taken; ``seconds_bound`` has every round's tree at the full cap.
Measured runs anneal sooner and fill the tree less, and took 0.2 to 0.6 of ``seconds`` (Adult at eps
0.3 / 1 / 3: 14 / 33 / 42 CPU s against 83; loans: 39 against 87; the 18-column class at 34,000 rows:
19 against 118), so ``max_seconds`` refuses only what cannot finish, never a run that merely might be
slow. Memory counts the release at its cap when n is not public.

Calibration (how the coefficients were set): ``benchmarks/bench_scale.py --calibrate
adult@0.3,adult@1,adult@3,loans@1,transport@1,wide50@1`` runs the mechanism on those tables (real
Adult, the 54-column loans table, generated 18- and 50-column tables) with its fit and scoring
functions wrapped: it records, for each of 203 fits, the tree's cells, the measurements and the CPU
seconds per step, and for each of 191 rounds the candidates scored, the tree's cells and the CPU
seconds of scoring, and fits both lines by least squares. Fit steps: 1.85e-8 s per cell and 9.9e-5 s
per measurement (R^2 0.96); scoring: 3.3e-4 s per candidate and 1.0e-6 s per tree cell (R^2 0.28: the
candidates' spread over the tree matters too). The constants below are those, rounded up, on the
2-core benchmark machine (shared, load 4 to 8 while measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from privsynth.mechanisms.aim.schedule import largest_schedule, rho_of_config, rounds_cap
from privsynth.mechanisms.aim.statistics import COUNT_CACHE_CELLS
from privsynth.schema.encoding import Domain

COEFFICIENTS = {
    "FIT_STEP": 2.0e-4,          # s per mirror-descent step (Python overhead)
    "FIT_CELL": 2.0e-8,          # s per tree cell per step
    "FIT_MEASUREMENT": 1.0e-4,   # s per measurement per step
    "SELECT_CANDIDATE": 3.5e-4,  # s per candidate scored
    "SELECT_CELL": 1.0e-6,       # s per tree cell per round (clique reductions)
    "COUNT_RECORD": 1.5e-8,      # s per distinct record per covering pass
    "SAMPLE_CELL": 1.5e-7,       # s per drawn row per attribute (sampling, expansion, one-hot)
    "START": 1.0,                # s: candidate weights, first fit, imports
}
TREE_FILL = 0.5
BASE_MB = 200.0                  # interpreter, numpy, pydantic, privsynth (measured RSS before the run)
TREE_COPIES = 6                  # clique tables, beliefs, line-search beliefs, cached reductions
CANDIDATE_BYTES = 400            # a candidate's tuple, weight, plan and score
CELLS_PER_PASS = 12              # marginals a covering pass serves, typically


@dataclass(frozen=True)
class CostForecast:
    """seconds: expected wall seconds on the benchmark machine; seconds_bound: every tree at its cap;
    memory_mb: peak resident memory, at most; rounds: the most rounds; tree_mb: the largest junction
    tree allowed; release_rows: the most records drawn; basis: what the numbers assume; parts:
    seconds by phase."""

    seconds: float
    seconds_bound: float
    memory_mb: float
    rounds: int
    tree_mb: float
    release_rows: int
    basis: str
    parts: dict[str, float] = field(default_factory=dict)


def _elementary_sums(sizes: list[int], k: int) -> list[float]:
    """e_j(sizes) for j = 0..k: the total cells of all j-way marginals."""
    e = [1.0] + [0.0] * k
    for s in sizes:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * s
    return e


def release_rows_bound(config, domain: Domain) -> int:
    """The most records the release draws: ``sample_rows`` if set, else the ``max_release_mb`` cap
    (the DP estimate of n is not known before the run, so the cap is what bounds it)."""
    if config.sample_rows is not None:
        return config.sample_rows
    cap = release_row_cap(config, domain)
    return min(cap, config.public_rows) if config.public_rows is not None else cap


def release_row_bytes(domain: Domain) -> int:
    """Peak bytes a drawn record holds: its one-hot point (a byte a level: the points are 0/1, uint8) and
    its codes drawn, expanded and sorted into distinct rows (three int64 copies)."""
    return domain.width + 3 * 8 * domain.n_attributes


def release_row_cap(config, domain: Domain) -> int:
    """Records drawn at most when ``sample_rows`` is None: as many as ``max_release_mb`` holds. A cap
    below n leaves the rounding stage to resample the release, and its sampling error then shows in every
    marginal (200 columns, 100,000 rows: 19,553 records drawn put far pairs' 2-way error at 0.022, against
    0.013 with all of them)."""
    return max(1, int(config.max_release_mb * 2**20 / release_row_bytes(domain)))


def forecast_cost(config, domain: Domain) -> CostForecast:
    """Seconds and peak memory of ``aim.run`` for this config and domain (module docstring)."""
    c = COEFFICIENTS
    d, sizes = domain.n_attributes, list(domain.sizes)
    rho = rho_of_config(config)
    schedule = largest_schedule(config, d)
    joint_cells = math.prod(sizes)
    cap_cells = config.max_model_size_mb * 2**20 / 8
    one_way_cells = sum(sizes)
    e = _elementary_sums(sizes, config.k)
    candidates = sum(math.comb(d, j) for j in range(1, config.k + 1))
    pool = min(candidates, config.max_candidates)

    def fit_step(cells: float, measurements: int) -> float:
        return c["FIT_STEP"] + c["FIT_CELL"] * cells + c["FIT_MEASUREMENT"] * measurements

    def tree(used: float, fill: float) -> float:
        return max(one_way_cells, min(joint_cells, cap_cells * min(1.0, used / rho) * fill))

    parts = {"start": c["START"] + config.iterations_per_round * fit_step(one_way_cells, d)}
    bound = dict(parts)
    for _name, fill, out in (("expected", TREE_FILL, parts), ("bound", 1.0, bound)):
        fits = select = 0.0
        for t, used in enumerate(schedule):
            cells = tree(used, fill)
            fits += config.iterations_per_round * fit_step(cells, d + t + 1)
            select += c["SELECT_CANDIDATE"] * pool + c["SELECT_CELL"] * cells
        final_cells = tree(rho, fill)
        out["round fits"] = fits
        out["selection"] = select
        out["final fit"] = config.final_iterations * fit_step(final_cells, d + len(schedule))
    rows = release_rows_bound(config, domain)
    sampling = c["SAMPLE_CELL"] * rows * d
    counted = min(candidates, len(schedule) * pool)
    passes = d + counted / CELLS_PER_PASS
    basis = (f"at most {len(schedule)} rounds (budget schedule without annealing, cap {rounds_cap(config, d)}), "
             f"each fit {config.iterations_per_round} steps, final fit {config.final_iterations}, "
             f"{pool} candidates a round, junction tree up to {config.max_model_size_mb:g} MB "
             f"(expected at {TREE_FILL:g} of the size rule), {rows:,} records drawn")
    if config.public_rows is not None:
        distinct = min(config.public_rows, joint_cells)
        parts["counting"] = bound["counting"] = c["COUNT_RECORD"] * distinct * passes
        basis += f"; counting over at most {distinct:,} distinct records (the declared public row count)"
    else:
        basis += "; counting not included (no public row count: about 1.5 s per 10^7 distinct records per 100 passes)"
    parts["sampling"] = bound["sampling"] = sampling
    tree_mb = min(config.max_model_size_mb, joint_cells * 8 / 2**20)
    # Count tables kept across rounds (up to the cache's cap) and one round's pool of them.
    mean_cells = sum(e[1:]) / max(1, candidates)
    counts_mb = (min(sum(e[1:]), COUNT_CACHE_CELLS) + pool * mean_cells) * 8 / 2**20
    release_mb = rows * release_row_bytes(domain) / 2**20
    memory = BASE_MB + TREE_COPIES * tree_mb + counts_mb + candidates * CANDIDATE_BYTES / 2**20 + release_mb
    if config.public_rows is not None:
        distinct = min(config.public_rows, joint_cells)
        memory += distinct * (d + 8 + 8) / 2**20          # compact columns, weights, one index
    return CostForecast(seconds=sum(parts.values()), seconds_bound=sum(bound.values()), memory_mb=memory,
                        rounds=len(schedule), tree_mb=tree_mb, release_rows=rows, basis=basis, parts=parts)
