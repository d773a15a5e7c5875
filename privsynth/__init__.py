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

from privsynth.api import Release, Synthesizer, synthesize
from privsynth.errors import (
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
                              RunFolderError,
                              SchemaError,
                              UnknownMechanismError,
                              ValidationFailed,
                              ValidationFailedError,
)
from privsynth.privacy.accounting import DEFAULT_DELTA
from privsynth.privacy.ledger import BudgetLedger as Ledger
from privsynth.run.parameters import DEFAULT_MECHANISM, RunParameters
from privsynth.schema import Schema, load_schema

__version__ = "0.2.0"

__all__ = ["DEFAULT_DELTA", "DEFAULT_MECHANISM", "BudgetExceeded", "BudgetExceededError", "BudgetNotSet",
           "BudgetNotSetError", "CredentialError", "InfeasibleRequest", "InputError", "Ledger", "LedgerError",
           "LimitError", "NoiseAlreadyDrawnError", "ParameterError", "Release", "RunFolderError", "RunParameters",
           "Schema", "SchemaError", "Synthesizer", "UnknownMechanismError", "ValidationFailed", "ValidationFailedError",
           "load_schema", "synthesize"]
