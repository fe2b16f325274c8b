"""Reading a move named in words (``left``, ``up``, ...): the one parser the grid games share."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from tsmg.core import Invalid

#: What may surround the move's name: spaces, quotes, punctuation, markdown emphasis, brackets.
SURROUNDINGS = " \t\r\n.,;:!?\"'`*_[](){}"


def parse_named_move(text: str, names: Sequence[str]) -> int | Invalid:
    """The index in ``names`` of the move ``text`` names, in any case and with any :data:`SURROUNDINGS`.

    Example:
        >>> parse_named_move(" **Left.** ", ("left", "down", "right", "up"))
        0
        >>> parse_named_move("north", ("left", "down", "right", "up")).reason
        "expected one of left, down, right, up; got 'north'"
    """
    move = _index_by_name(tuple(names)).get(text.strip(SURROUNDINGS).lower())
    if move is None:
        shown = text if len(text) <= 40 else text[:37] + "..."
        return Invalid(f"expected one of {', '.join(names)}; got {shown!r}")
    return move


@lru_cache(maxsize=16)
def _index_by_name(names: tuple[str, ...]) -> dict[str, int]:
    return {name: index for index, name in enumerate(names)}
