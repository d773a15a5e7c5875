"""A noise source's meter: every privacy draw priced against the charge that authorised it (docs/design.md 5.2).

The ledger is charged before any noise is drawn (``privacy.charged``); the meter then checks, draw by draw,
that what the code draws stays inside that charge, as OpenDP's privacy filter and Tumult's accountant do.
Each draw is priced from its noise scale and the sensitivity its caller states (``accounting``):

* Gaussian noise of scale sigma on a statistic of L2 sensitivity Delta: rho = Delta^2 / (2 sigma^2);
* Laplace noise of scale b on a statistic of L1 sensitivity Delta: pure eps = Delta / b (rho = eps^2 / 2);
* report-noisy-max with Gumbel scale b over scores of sensitivity Delta: eps = 2 Delta / b, rho = eps^2 / 8
  (bounded range); top-k is k of them.

A scope (``NoiseMeter.one_release(price)``) makes several draws one release, paid once at its start, its draws
free inside it: a selection that redraws until its pick is eligible (aim's rejection sampler and peeling: only
the pick leaves it, and its law is the exponential mechanism's over the eligible set), or a sampler whose draws
are not noise on a statistic (the Bingham sampler of microaggregation's private PCA, private sampling's draw of
records), each at the price its mechanism proves.

Every draw is paid before it is made. A draw that would take the spend past the allowance raises
``InternalError``: the code would draw more than was charged (a bug), and nothing of that draw is returned.
A source authorised without an allowance (the privacy audit's and the tests' own sources) keeps count and
checks nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from privsynth.errors import InternalError
from privsynth.privacy.accounting import (
    PrivacyCost,
    exponential_rho,
    gaussian_rho,
    laplace_epsilon,
    noisy_max_epsilon,
    rho_from_pure_epsilon,
)

# Float sums of many small prices may pass an allowance computed in one step by a few ulps.
RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Price:
    """What one draw costs: rho (zCDP), and its pure epsilon when it is pure DP (None: it is not)."""

    rho: float
    pure_epsilon: float | None

    @property
    def epsilon_or_inf(self) -> float:
        return math.inf if self.pure_epsilon is None else self.pure_epsilon


def gaussian_price(sigma: float, l2_sensitivity: float) -> Price:
    return Price(gaussian_rho(sigma, l2_sensitivity), None)


def laplace_price(scale: float, l1_sensitivity: float) -> Price:
    epsilon = laplace_epsilon(scale, l1_sensitivity)
    return Price(rho_from_pure_epsilon(epsilon), epsilon)


def noisy_max_price(scale: float, sensitivity: float, picks: int = 1) -> Price:
    epsilon = noisy_max_epsilon(scale, sensitivity)
    return Price(picks * exponential_rho(epsilon), picks * epsilon)


def pure_price(epsilon: float) -> Price:
    """An eps-DP release (a sampler whose law is its proof)."""
    return Price(rho_from_pure_epsilon(epsilon), float(epsilon))


def price_of(cost: PrivacyCost) -> Price:
    """A mechanism's proven cost as a scope's price."""
    return Price(float(cost.rho), cost.pure_epsilon)


class NoiseMeter:
    """The spend of one authorised noise source against its allowance (None: counted, never checked)."""

    def __init__(self, allowance: PrivacyCost | None) -> None:
        self.allowance = allowance if allowance is not None and allowance.is_dp else None
        self.rho = 0.0
        self.pure_epsilon = 0.0  # inf once a draw is not pure DP
        self.draws = 0
        self._scopes: list[Price] = []

    @property
    def checked(self) -> bool:
        return self.allowance is not None

    def pay(self, what: str, price: Price | None) -> None:
        """Pay for one ``what`` draw before it is made; free inside a scope, which paid for its draws. A draw
        whose caller stated no sensitivity (``price`` None) is refused outside a scope where the meter checks."""
        self.draws += 1
        if self._scopes:
            return
        if price is not None:
            self._add(price.rho, price.epsilon_or_inf)
        elif self.checked:
            raise InternalError(f"a {what} draw states no sensitivity outside a priced scope: the meter cannot price "
                                "it against the charge (a bug of the mechanism; nothing was drawn)")

    @contextmanager
    def one_release(self, price: Price) -> Iterator[None]:
        """The draws inside make one release of cost ``price``, paid now (inside another scope: already paid)."""
        if not self._scopes:
            self._add(price.rho, price.epsilon_or_inf)
        self._scopes.append(price)
        try:
            yield
        finally:
            self._scopes.pop()

    def _add(self, rho: float, epsilon: float) -> None:
        total_rho = self.rho + rho
        total_epsilon = self.pure_epsilon + epsilon
        allowance = self.allowance
        if allowance is not None:
            if total_rho > allowance.rho * (1.0 + RELATIVE_TOLERANCE):
                raise InternalError(f"noise drawn past its charge: this draw would bring the release to rho "
                                    f"{total_rho:.6g}, over the {allowance.rho:.6g} charged (a bug of the mechanism; "
                                    "nothing of this draw was made)")
            if allowance.pure_epsilon is not None and total_epsilon > allowance.pure_epsilon * (
                    1.0 + RELATIVE_TOLERANCE):
                raise InternalError(f"noise drawn past its pure-DP charge: this draw would bring the release to "
                                    f"epsilon {total_epsilon:.6g}, over the {allowance.pure_epsilon:.6g} charged "
                                    "(Gaussian noise is never pure DP; a bug of the mechanism; nothing was drawn)")
        self.rho, self.pure_epsilon = total_rho, total_epsilon

    def spent(self) -> Price:
        """What the draws so far cost (pure epsilon None once any draw was not pure DP)."""
        return Price(self.rho, None if math.isinf(self.pure_epsilon) else self.pure_epsilon)
