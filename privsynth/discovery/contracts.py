"""``--public SOURCE``: the public facts a warehouse already has, read from its data contracts.

A SOURCE is

* a dbt ``schema.yml`` (a YAML file with ``models:`` or ``sources:``), or a dbt project folder (its
  ``dbt_project.yml`` names the model paths; every YAML file under them is read), with
  ``--public-model NAME`` where it describes several models;
* a Great Expectations suite (JSON with ``expectations``: what ``privsynth schema expectations`` writes,
  or a suite saved by GX itself);
* a Frictionless Table Schema (JSON or YAML with ``fields``);
* ``db:``: the input database's own catalogue (``catalogue``: ENUM types, CHECK constraints, NOT NULL,
  declared types; PostgreSQL and DuckDB).

What a contract states is PUBLIC: it is read from the contract, never from the rows, and is never
charged. Facts of several sources are merged; two that contradict each other are refused
(``PublicFacts.merged``). Errors name the file and the entry.

A source whose facts may have been computed from the rows (a GX suite a profiler made; a catalogue's
ENUM labels or CHECK values) is refused unless ``trust_data_derived`` (``--trust-data-derived-contracts``):
rule 10, ``contract_trust``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from privsynth.discovery.contract_facts import Where, combined
from privsynth.discovery.contract_formats import dbt_column_facts, dbt_models, frictionless_facts, gx_facts
from privsynth.discovery.contract_trust import accepted
from privsynth.discovery.public import PublicFacts
from privsynth.errors import ContractError

DB_PREFIX = "db:"


def read_public_sources(sources: Sequence[str] | None, model: str | None = None,
                        input_source: Any = None, trust_data_derived: bool = False) -> PublicFacts:
    """The merged public facts of every SOURCE; ``model`` picks a dbt model, ``input_source`` (the run's
    ``--input``) is the database ``db:`` reads the catalogue of. A source with possibly data-derived facts
    is refused (``DataDerivedContractError``) unless ``trust_data_derived``; then they are marked so."""
    facts = PublicFacts()
    for source in sources or ():
        facts = facts.merged(accepted(read_public_source(str(source), model, input_source), str(source),
                                      trust_data_derived))
    return facts


def read_public_source(source: str, model: str | None = None, input_source: Any = None) -> PublicFacts:
    """One SOURCE's facts (module docstring), possibly data-derived ones marked (``PublicColumn.derived``)."""
    if source.startswith(DB_PREFIX):
        from privsynth.discovery.catalogue import catalogue_facts

        if source != DB_PREFIX:
            raise ContractError(f"--public {source!r}: write db: alone; it reads the catalogue of --input's database")
        return catalogue_facts(input_source)
    path = Path(source)
    if path.is_dir():
        return dbt_project_facts(path, source, model)
    doc = load_document(path, source)
    if "models" in doc or "sources" in doc:
        where = Where("dbt", source)
        return dbt_model_facts(pick_model({name: (where, cols) for name, cols in dbt_models(doc, where).items()},
                                          model, source))
    if "fields" in doc:
        return frictionless_facts(doc, Where("Frictionless", source))
    if "expectations" in doc:
        return gx_facts(doc, Where("GX", source))
    raise ContractError(f"--public {source!r}: not a dbt schema.yml (models:), a Great Expectations suite "
                        "(expectations) or a Frictionless table schema (fields)")


def load_document(path: Path, source: str) -> dict:
    """A contract file as a mapping (JSON for .json, else YAML, which also reads JSON)."""
    if not path.is_file():
        raise ContractError(f"--public {source!r}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
        raise ContractError(f"--public {source!r}: cannot be read as JSON or YAML ({type(err).__name__})") from None
    if not isinstance(doc, dict):
        raise ContractError(f"--public {source!r}: expected a mapping at the top of the file, got "
                            f"{type(doc).__name__}")
    return doc


def dbt_project_facts(folder: Path, source: str, model: str | None) -> PublicFacts:
    """A dbt project folder: the model described in the YAML files under its ``model-paths``."""
    project = folder / "dbt_project.yml"
    if not project.is_file():
        raise ContractError(f"--public {source!r}: a folder must be a dbt project (it has no dbt_project.yml)")
    paths = load_document(project, str(project)).get("model-paths") or ["models"]
    if not isinstance(paths, list):
        raise ContractError(f"dbt {project}: model-paths must be a list, got {paths!r}")
    models: dict[str, tuple[Where, list]] = {}
    for sub in paths:
        for file in sorted((folder / str(sub)).rglob("*.y*ml")):
            doc = load_document(file, str(file))
            if "models" not in doc and "sources" not in doc:
                continue
            where = Where("dbt", str(file))
            for name, columns in dbt_models(doc, where).items():
                if name in models:
                    raise ContractError(f"dbt {source}: model {name!r} is described in {models[name][0].path} "
                                        f"and in {file}")
                models[name] = (where, columns)
    return dbt_model_facts(pick_model(models, model, source))


def pick_model(models: dict[str, tuple[Where, list]], model: str | None, source: str) -> tuple[str, Where, list]:
    """The model to read: ``--public-model``, else the only one described."""
    if model is not None:
        if model not in models:
            raise ContractError(f"dbt {source}: model {model!r} (--public-model) is not in it; it describes "
                                f"{sorted(models)}")
        return (model, *models[model])
    if len(models) != 1:
        raise ContractError(f"dbt {source}: it describes {len(models)} models {sorted(models)}; choose one with "
                            "--public-model NAME")
    name = next(iter(models))
    return (name, *models[name])


def dbt_model_facts(chosen: tuple[str, Where, list]) -> PublicFacts:
    name, where, columns = chosen
    return combined([f for column in columns for f in dbt_column_facts(column, name, where)], where)
