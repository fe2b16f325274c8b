"""Token prices for API backends: USD per million input (prompt) and output (completion) tokens.

No prices ship with tsmg: they change too often to hard-code. Give the ones you pay, either for
one model or as a table keyed by model name (an entry may end in ``*`` to match a prefix):

>>> table = {"gpt-4o-mini": (0.15, 0.60), "my-org/*": Price(1.0, 2.0)}
>>> price_for(table, "gpt-4o-mini").cost(prompt_tokens=1_000_000, completion_tokens=500_000)
0.45
>>> price_for(table, "my-org/small-v2")
Price(input_per_million=1.0, output_per_million=2.0)
>>> price_for(table, "unknown") is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Price", "PriceSpec", "PriceTable", "price_for"]


@dataclass(frozen=True, slots=True)
class Price:
    """What one model costs.

    Attributes:
        input_per_million: USD per million prompt tokens.
        output_per_million: USD per million completion tokens.
    """

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        if self.input_per_million < 0 or self.output_per_million < 0:
            raise ValueError(f"prices must be >= 0, got {self}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The USD cost of one call with these token counts."""
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1_000_000


PriceSpec = Price | tuple[float, float]
"""A price: a :class:`Price` or an ``(input_per_million, output_per_million)`` pair."""

PriceTable = Mapping[str, PriceSpec]
"""Prices keyed by model name; a key ending in ``*`` matches every model name with that prefix."""


def _as_price(spec: PriceSpec) -> Price:
    if isinstance(spec, Price):
        return spec
    input_per_million, output_per_million = spec
    return Price(float(input_per_million), float(output_per_million))


def price_for(prices: PriceSpec | PriceTable | None, model: str) -> Price | None:
    """The price of ``model``: exact name first, then the longest matching ``prefix*`` key.

    Args:
        prices: One price (applies to any model), a table, or None (no prices known).
        model: The model name sent to the server.

    Returns:
        The price, or None when the table has none for this model (its cost is then unknown).
    """
    if prices is None:
        return None
    if isinstance(prices, Price | tuple):
        return _as_price(prices)
    if model in prices:
        return _as_price(prices[model])
    prefixes = [key for key in prices if key.endswith("*") and model.startswith(key[:-1])]
    if not prefixes:
        return None
    return _as_price(prices[max(prefixes, key=len)])
