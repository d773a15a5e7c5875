"""The one error family of privsynth, at the lowest floor: every module raises these, none is defined elsewhere.

``PrivsynthError`` is the family. Two branches:

* ``RefusalError`` (also a ValueError): a request privsynth refuses and the user fixes: input,
  parameter, schema, budget, a resource limit. The CLI maps each to exit status 2 and one line; the
  Prefect flow ends in a Failed state whose message is that line. None of their messages quotes a data
  value or a count of the private table.
* ``InternalError`` (also a RuntimeError): a computation that did not finish as it must (a solver that
  missed its tolerance, noise asked for before the charge). Never a silently worse release: the run
  stops, and what was charged stays charged.

This module imports nothing from privsynth, so every floor may import it (docs/design.md 1.2).
"""

from __future__ import annotations


class PrivsynthError(Exception):
    """Every error privsynth raises: catch this, or one of its subclasses (never a class name)."""


class RefusalError(PrivsynthError, ValueError):
    """The request is refused before anything private is released; the message says what to fix."""


class InternalError(PrivsynthError, RuntimeError):
    """A computation did not finish as it must; nothing worse than asked for is released."""


# ---------------------------------------------------------------- refusals: what the user fixes

class ParameterError(RefusalError):
    """A run parameter is invalid; raised before any data is read."""


class ContractError(ParameterError):
    """A data contract (dbt, GX, Frictionless, the database catalogue) is malformed or contradicts another
    source; the message names the file and the entry, never a data value."""


class DataDerivedContractError(ContractError):
    """A data contract looks data-derived (a profiled GX suite, a catalogue's ENUM labels or CHECK values) and the
    owner did not accept it as public (``--trust-data-derived-contracts``); nothing was read or charged."""


class SchemaError(RefusalError):
    """A schema file or model is invalid; the message names the column and the problem."""


class LimitError(RefusalError):
    """A documented resource limit would be exceeded; nothing was read or charged."""


class InputError(RefusalError):
    """The input cannot be read as a table the schema describes; the message names file and problem."""


class CredentialError(RefusalError):
    """A URL carries a literal password, or references an environment variable that is not set."""


class SandboxError(RefusalError):
    """User SQL was refused; the message names the rule it broke (never the query text)."""


class ValidationFailedError(RefusalError):
    """The input failed schema validation; nothing was charged."""


class RunFolderError(RefusalError):
    """The output folder cannot hold this run (not empty, another run's, not writable)."""


class UnknownMechanismError(RefusalError):
    """No mechanism of that name is registered."""


class InfeasibleRequestError(RefusalError):
    """The requested rows exceed what the privacy guarantee allows at this epsilon (or it allows none)."""


class LedgerError(RefusalError):
    """The budget ledger refused: the base of its refusals."""


class BudgetExceededError(LedgerError):
    """The charge would take the dataset over its budget; nothing was recorded."""


class BudgetNotSetError(LedgerError):
    """The dataset has no budget and the caller required one."""


class NonPrivateChargeError(LedgerError):
    """A charge with no DP guarantee was made against a dataset guarded by a budget."""


class UnknownDatasetError(LedgerError):
    """The ledger holds neither a budget nor a charge for this dataset."""


class NoiseAlreadyDrawnError(LedgerError):
    """Noise was already drawn for this release key; drawing again would be a second release for one charge."""


class NoiseJournalError(RefusalError):
    """A release's noise journal cannot be replayed (another release, sampler or code path, or another process
    holds it); said before anything new is drawn."""


class ReleaseKeyConflictError(LedgerError):
    """A release key is already charged with a different cost: the key does not identify the release."""


# ---------------------------------------------------------------- internal: a computation that failed

class BudgetNotChargedError(InternalError):
    """Privacy noise was requested before the budget ledger was charged."""


class SolverError(InternalError):
    """An optimisation step did not reach its tolerance (never a silently worse release)."""


class LPFailedError(InternalError):
    """The reweighting LP did not reach an optimal solution."""


class ReducedSpaceError(InternalError):
    """No well-conditioned reduced space was found within the allowed number of draws."""


class InjectedFault(InternalError):
    """Raised by ``privsynth.run.faults.fault_point`` in its in-process mode (tests only)."""


InfeasibleRequest = InfeasibleRequestError
BudgetExceeded = BudgetExceededError
BudgetNotSet = BudgetNotSetError
ValidationFailed = ValidationFailedError

# What the CLI and the flow report as one line (exit 2 / a Failed state): every refusal.
KNOWN_ERRORS: tuple[type[BaseException], ...] = (RefusalError,)

__all__ = ["BudgetExceeded", "BudgetExceededError", "BudgetNotChargedError", "BudgetNotSet", "BudgetNotSetError",
           "ContractError", "CredentialError", "DataDerivedContractError", "InfeasibleRequest",
           "InfeasibleRequestError", "InjectedFault", "InputError", "InternalError", "KNOWN_ERRORS", "LPFailedError",
           "LedgerError", "LimitError", "NoiseAlreadyDrawnError", "NonPrivateChargeError", "ParameterError",
           "PrivsynthError", "ReducedSpaceError", "RefusalError", "ReleaseKeyConflictError", "RunFolderError",
           "SandboxError", "SchemaError", "SolverError", "UnknownDatasetError", "UnknownMechanismError",
           "ValidationFailed", "ValidationFailedError"]
