"""``tsmg serve --import tests.serve.flawed_games``: served games with a flaw of their own.

Only servers started by the tests import it, so the catalog-wide tests never meet these games.
"""

from typing import Any

import tsmg
from games.frozen_lake import FrozenLake
from games.tictactoe import TicTacToe
from tsmg import RulesGame


class SecondParseFails(FrozenLake):
    """Frozen Lake whose ``parse_action`` raises on its second call: a bug of the game, not of any answer."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.parses = 0

    def parse_action(self, agent: str, text: str, state: Any) -> Any:
        self.parses += 1
        if self.parses == 2:
            raise KeyError("a bug on the second parse")
        return super().parse_action(agent, text, state)


class NoOracleTicTacToe(TicTacToe):
    """Tic-tac-toe with RulesGame's default oracle: none, so no server may offer ``oracle`` to play a seat."""

    oracle = RulesGame.oracle


tsmg.register("test/SecondParseFails-v0", SecondParseFails, description="parse_action raises on its second call")
tsmg.register("test/NoOracleTicTacToe-v0", NoOracleTicTacToe, description="tic-tac-toe without an oracle")
