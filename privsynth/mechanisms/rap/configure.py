"""RAP's config for a domain: the defaults fitted to a narrow table (public facts only, before any data is read)."""

from __future__ import annotations

from privsynth.mechanisms.rap.mechanism import Config, n_candidate_items
from privsynth.schema.encoding import Domain


def configure_for(config: Config, domain: Domain) -> Config:
    """The config for this domain: where the default rounds x picks (72 selections) exceed the candidates a narrow
    table has (a 4-column table's downward closure holds 14 marginals), the rounds stay (at most one a candidate)
    and the picks per round fall to what the candidates fill, so each candidate can be measured once, as selection
    without replacement allows, and the path stays as adaptive as the default's. Rounds or picks the user set are
    kept, and ``check_config`` names the problem. The total cost (the config's epsilon and delta) is unchanged; its
    split gives each of the fewer picks more."""
    if {"rounds", "picks_per_round"} & config.model_fields_set or config.k > domain.n_attributes:
        return config
    items = n_candidate_items(config, domain)
    if config.rounds * config.picks_per_round <= items:
        return config
    rounds = min(config.rounds, items)
    return config.model_copy(update={"rounds": rounds, "picks_per_round": max(1, items // rounds)})
