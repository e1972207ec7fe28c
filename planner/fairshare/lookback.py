"""How much past usage counts in the fair share: a sliding window or exponential decay.

Index: the age a ≥ 1 of a period, counted back from the period being decided
(a = 1 the period just before it). Usage that happened at age a enters the
offset U of the water-filling with weight

    window of W periods:     ω(a) = 1 if 1 ≤ a ≤ W else 0      (W = 0: no lookback)
    decay, half-life h > 0:  ω(a) = 0.5 ** ((a − 1) / h)         for a ≥ 1

and ω(a) = 0 for a < 1 (the period itself and later ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Lookback:
    """Either ``window_periods`` (a sliding window) or ``half_life_periods`` (decay)."""

    window_periods: int | None = None
    half_life_periods: float | None = None

    def __post_init__(self) -> None:
        if (self.window_periods is None) == (self.half_life_periods is None):
            raise ValueError("set exactly one of window_periods and half_life_periods")
        if self.window_periods is not None and (
                isinstance(self.window_periods, bool) or self.window_periods < 0
                or self.window_periods != int(self.window_periods)):
            raise ValueError(f"window_periods must be a whole number ≥ 0, "
                             f"got {self.window_periods!r}")
        if self.half_life_periods is not None and not (
                math.isfinite(self.half_life_periods) and self.half_life_periods > 0):
            raise ValueError(f"half_life_periods must be > 0, got {self.half_life_periods!r}")

    @classmethod
    def none(cls) -> Lookback:
        """No lookback: past usage never counts."""
        return cls(window_periods=0)

    @classmethod
    def from_days(cls, window_days: float | None = None, half_life_days: float | None = None,
                  period_hours: float = 24) -> Lookback:
        """A lookback given in days, on a grid of ``period_hours``-long periods.

        A window rounds to the nearest whole number of periods (halves up), at least
        one period if ``window_days`` > 0; a half-life is kept fractional. 0 days (or
        neither given) means no lookback.
        """
        if window_days is not None and half_life_days is not None:
            raise ValueError("give window_days or half_life_days, not both")
        if not period_hours > 0:
            raise ValueError(f"period_hours must be > 0, got {period_hours!r}")
        days = window_days if window_days is not None else half_life_days
        if days is None or days == 0:
            return cls.none()
        if not (math.isfinite(days) and days > 0):
            raise ValueError(f"lookback days must be ≥ 0, got {days!r}")
        periods = days * 24 / period_hours
        if half_life_days is not None:
            return cls(half_life_periods=float(periods))
        return cls(window_periods=max(1, math.floor(periods + 0.5)))

    def weights(self, ages: np.ndarray) -> np.ndarray:
        """ω(age) for each entry of ``ages`` (periods before the decision, see module doc)."""
        ages = np.asarray(ages, dtype=np.float64)
        past = ages >= 1
        if self.window_periods is not None:
            return (past & (ages <= self.window_periods)).astype(np.float64)
        assert self.half_life_periods is not None
        return np.where(past, 0.5 ** ((np.maximum(ages, 1.0) - 1.0) / self.half_life_periods),
                        0.0)

    def half_life_hours(self, period_hours: float) -> float | None:
        """The half-life of an exponential decay that stands for this lookback, in hours.

        A decay's own half-life; for a window of W periods the half-life h whose usage has
        the window's mean age: the decay weighs usage of age a by 2^(−a/h), mean age
        h / ln 2, and the window's is W/2, so h = ln 2 · W / 2 (a 7-day window: 58.2 h).
        This is what an executor whose fair share can only decay (Slurm's
        ``PriorityDecayHalfLife``) is given. None without a lookback (usage never counts,
        which no decay expresses).
        """
        if self.half_life_periods is not None:
            return self.half_life_periods * period_hours
        if not self.window_periods:
            return None
        return math.log(2) * self.window_periods * period_hours / 2
