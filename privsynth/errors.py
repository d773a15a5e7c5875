"""The typed errors of privsynth, importable from the top level.

Each is a ValueError: an input, parameter, schema or budget problem the user fixes. The CLI maps
every one to exit status 2 and one line; the Prefect flow ends in a Failed state whose message is
that line. None of their messages quotes a data value or a count of the private table.
"""

from __future__ import annotations

from privsynth.engine.datasource import ValidationFailedError
from privsynth.io import InputError
from privsynth.io.credentials import CredentialError
from privsynth.mechanisms import UnknownMechanismError
from privsynth.mechanisms.private_sampling import InfeasibleRequestError
from privsynth.privacy.ledger import (
    BudgetExceededError,
    BudgetNotSetError,
    LedgerError,
    NoiseAlreadyDrawnError,
    NonPrivateChargeError,
    UnknownDatasetError,
)
from privsynth.run.parameters import ParameterError
from privsynth.run.runfolder import RunFolderError
from privsynth.schema import SchemaError
from privsynth.schema.limits import LimitError


class PrivsynthError(ValueError):
    """Base of errors raised by the Python API itself."""


InfeasibleRequest = InfeasibleRequestError
BudgetExceeded = BudgetExceededError
BudgetNotSet = BudgetNotSetError
ValidationFailed = ValidationFailedError

KNOWN_ERRORS: tuple[type[BaseException], ...] = (
    ParameterError, InputError, SchemaError, ValidationFailedError, RunFolderError, UnknownMechanismError,
    LedgerError, CredentialError, LimitError, InfeasibleRequest, PrivsynthError,
)

__all__ = ["BudgetExceeded", "BudgetExceededError", "BudgetNotSet", "BudgetNotSetError", "CredentialError",
           "InfeasibleRequest", "InfeasibleRequestError", "InputError", "KNOWN_ERRORS", "LedgerError", "LimitError", "NoiseAlreadyDrawnError",
           "NonPrivateChargeError", "ParameterError", "PrivsynthError", "RunFolderError", "SchemaError",
           "UnknownDatasetError", "UnknownMechanismError", "ValidationFailed", "ValidationFailedError"]
