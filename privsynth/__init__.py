"""privsynth: differentially private synthetic tables that keep low-order marginals.

The public API (one code path with the CLI and the Prefect flow):

    import privsynth
    schema = privsynth.Schema.from_yaml("schemas/adult.yaml")
    release = privsynth.synthesize(data, schema, epsilon=1.0)
    release.to_pandas(); release.sample(10_000); release.privacy; release.report
    privsynth.Ledger().set_budget("adult", epsilon=3.0); privsynth.Ledger().status("adult")
    privsynth.Synthesizer.create("aim", epsilon=1.0).fit(df, schema=schema).sample(1_000)

Errors are the typed exceptions below (``privsynth.errors``), each a ValueError whose message names
the column, file or parameter at fault; the CLI maps them to exit status 2.
"""

import importlib
from typing import TYPE_CHECKING

# The public names and where they live. They are imported on first use (PEP 562), so that
# `privsynth --help`, `import privsynth.errors` or one mechanism never pays for the whole house.
_EXPORTS = {
    "Release": "privsynth.api", "Synthesizer": "privsynth.api", "synthesize": "privsynth.api",
    "DEFAULT_DELTA": "privsynth.privacy.accounting", "DEFAULT_MECHANISM": "privsynth.run.parameters",
    "RunParameters": "privsynth.run.parameters", "Schema": "privsynth.schema", "load_schema": "privsynth.schema",
    **{name: "privsynth.errors" for name in (
        "BudgetExceeded", "BudgetExceededError", "BudgetNotSet", "BudgetNotSetError", "CredentialError",
        "InfeasibleRequest", "InputError", "LedgerError", "LimitError", "NoiseAlreadyDrawnError", "ParameterError",
        "PrivsynthError", "RunFolderError", "SchemaError", "UnknownMechanismError", "ValidationFailed",
        "ValidationFailedError")},
}


def __getattr__(name: str):
    if name == "Ledger":
        from privsynth.privacy.ledger import BudgetLedger

        return BudgetLedger
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'privsynth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "Ledger"})


if TYPE_CHECKING:  # what type checkers and IDEs see
    from privsynth.api import Release, Synthesizer, synthesize  # noqa: F401
    from privsynth.errors import (  # noqa: F401
        BudgetExceeded,
        BudgetExceededError,
        BudgetNotSet,
        BudgetNotSetError,
        CredentialError,
        InfeasibleRequest,
        InputError,
        LedgerError,
        LimitError,
        NoiseAlreadyDrawnError,
        ParameterError,
        PrivsynthError,
        RunFolderError,
        SchemaError,
        UnknownMechanismError,
        ValidationFailed,
        ValidationFailedError,
    )
    from privsynth.privacy.accounting import DEFAULT_DELTA  # noqa: F401
    from privsynth.privacy.ledger import BudgetLedger as Ledger  # noqa: F401
    from privsynth.run.parameters import DEFAULT_MECHANISM, RunParameters  # noqa: F401
    from privsynth.schema import Schema, load_schema  # noqa: F401

__version__ = "0.2.0"

__all__ = ["DEFAULT_DELTA", "DEFAULT_MECHANISM", "BudgetExceeded", "BudgetExceededError", "BudgetNotSet",
           "BudgetNotSetError", "CredentialError", "InfeasibleRequest", "InputError", "Ledger", "LedgerError",
           "LimitError", "NoiseAlreadyDrawnError", "ParameterError", "PrivsynthError", "Release", "RunFolderError",
           "RunParameters", "Schema", "SchemaError", "Synthesizer", "UnknownMechanismError", "ValidationFailed",
           "ValidationFailedError", "load_schema", "synthesize"]
