"""Games with bugs of their own, as users write them: ``--import tests/failing_games.py`` registers them.

* ``test/OldSignatureLake-v0``: Frozen Lake whose ``parse_action`` still has the two-argument
  signature the README once showed, so every call of it raises a TypeError.
* ``test/NoOracleLake-v0``: Frozen Lake without an oracle.
"""

from __future__ import annotations

from typing import Any

import tsmg
from games.frozen_lake import _MOVES, FrozenLake
from tsmg.core import RulesGame


class OldSignatureLake(FrozenLake):
    """``parse_action(agent, text)``: the referee's three-argument call raises a TypeError."""

    def parse_action(self, agent: str, text: str) -> Any:  # type: ignore[override]
        return _MOVES.read(text)


class NoOracleLake(FrozenLake):
    """Frozen Lake with RulesGame's default oracle: none."""

    oracle = RulesGame.oracle


tsmg.register(
    "test/OldSignatureLake-v0", OldSignatureLake, description="a parse_action with the old signature", max_steps=20
)
tsmg.register("test/NoOracleLake-v0", NoOracleLake, description="no oracle", max_steps=20)
