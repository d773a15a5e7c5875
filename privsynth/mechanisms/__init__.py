"""The private mechanisms, one module per paper, looked up by name.

Modules are imported lazily so that picking one mechanism never pays for another's imports.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from privsynth.errors import UnknownMechanismError  # noqa: F401  (re-exported: raised here)
from privsynth.mechanisms.catalogue import CATALOGUE

DEFAULT_MECHANISM = "aim"  # the one a run uses when none is named
MECHANISM_MODULES: dict[str, str] = {entry.name: entry.module for entry in CATALOGUE}


def get_mechanism(name: str) -> ModuleType:
    """The mechanism module registered under ``name`` (see privsynth.mechanisms.base for its contract)."""
    if name not in MECHANISM_MODULES:
        raise UnknownMechanismError(
            f"unknown mechanism {name!r}; expected one of {sorted(MECHANISM_MODULES)}")
    return importlib.import_module(MECHANISM_MODULES[name])
