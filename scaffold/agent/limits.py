"""Budgets checked before every model call: steps, wall time, tokens and cost.

Cost is priced from the config's table (USD per million tokens; ``input``, ``output``, ``cache_read``,
``cache_write``). A model is looked up by its exact name, then by the longest table key it starts with
(``gpt-4.1-2025-04-14`` uses ``gpt-4.1``), also after dropping a ``vendor/`` prefix.
"""

from __future__ import annotations

import time

from scaffold.agent.config import Limits, Price
from scaffold.agent.endings import LimitReached
from scaffold.agent.models.base import Usage


def find_price(prices: dict[str, Price], model: str) -> Price | None:
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in prices:
            return prices[name]
        matches = [key for key in prices if name.startswith(key)]
        if matches:
            return prices[max(matches, key=len)]
    return None


def cost_usd(usage: Usage, price: Price | None) -> float:
    if price is None:
        return 0.0
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / 1e6


class Budget:
    """The ``limits`` section in force (0: no such limit) and what the run has used."""

    def __init__(self, limits: Limits, price: Price | None) -> None:
        self.step_limit = limits.step_limit
        self.wall_time_limit_s = limits.wall_time_limit_s
        self.token_limit = limits.token_limit
        self.cost_limit_usd = limits.cost_limit_usd
        self.price = price
        self.started = time.monotonic()
        self.steps = 0
        self.usage = Usage()
        self.cost_usd = 0.0

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def wall_time_left_s(self) -> float | None:
        """Seconds left of the wall-time budget, or None without one."""
        if not self.wall_time_limit_s:
            return None
        return max(0.0, self.wall_time_limit_s - self.elapsed_s)

    @property
    def tokens(self) -> int:
        return self.usage.prompt_tokens + self.usage.output_tokens

    def record(self, usage: Usage) -> float:
        """Count one model call; return its cost in USD."""
        self.steps += 1
        self.usage.add(usage)
        cost = cost_usd(usage, self.price)
        self.cost_usd += cost
        return cost

    def fractions(self) -> dict[str, float]:
        """Share of each active budget used so far."""
        out = {}
        if self.step_limit:
            out["steps"] = self.steps / self.step_limit
        if self.wall_time_limit_s:
            out["wall_time"] = self.elapsed_s / self.wall_time_limit_s
        if self.token_limit:
            out["tokens"] = self.tokens / self.token_limit
        if self.cost_limit_usd and self.price:
            out["cost"] = self.cost_usd / self.cost_limit_usd
        return out

    def used_fraction(self) -> float:
        return max(self.fractions().values(), default=0.0)

    def check(self) -> None:
        """Raise :class:`LimitReached` if any budget is spent."""
        for name, fraction in self.fractions().items():
            if fraction >= 1.0:
                raise LimitReached(f"{name} limit reached ({self.describe()})")

    def describe(self) -> str:
        parts = [f"{self.steps} steps", f"{self.elapsed_s:.0f} s", f"{self.tokens} tokens"]
        if self.price:
            parts.append(f"${self.cost_usd:.4f}")
        return ", ".join(parts)
