"""Games with bugs of their own, as users write them (``tests/register_failing_games.py`` registers them).

* :class:`OldSignatureLake`: Frozen Lake whose ``parse_action`` still has the two-argument
  signature the README once showed, so every call of it raises a TypeError.
* :class:`NoOracleLake`: Frozen Lake without an oracle.
"""

from __future__ import annotations

from typing import Any

from games.frozen_lake import _MOVES, FrozenLake
from tsmg.core import RulesGame


class OldSignatureLake(FrozenLake):
    """``parse_action(agent, text)``: the referee's three-argument call raises a TypeError."""

    def parse_action(self, agent: str, text: str) -> Any:  # type: ignore[override]
        return _MOVES.read(text)


class NoOracleLake(FrozenLake):
    """Frozen Lake with RulesGame's default oracle: none."""

    oracle = RulesGame.oracle
