"""Connect Four (6 rows, 7 columns) as a two-player text game, and a single-agent variant.

Rules are in :mod:`games.connect_four_rules`. ``player_0`` plays X and moves first, ``player_1``
plays O. Four in a line wins: +1 to the winner, -1 to the loser, 0 for a full-board draw.

Answers name a column by its number ``1``..``7`` from the left (surrounding spaces or
punctuation aside), the answer rule of :mod:`tsmg.answers`. A full column is an invalid answer
whose reason lists the open columns.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from games import connect_four_rules as rules
from games.opponents import OpponentConfig, VsFixedOpponent
from tsmg.answers import normalize_answer, quote
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_EXPECTED = "expected a column number 1-7 (1 = leftmost)"
_COLUMN = re.compile(r"([1-7])", re.ASCII)


class ConnectFourConfig(GameConfig):
    """Options of Connect Four."""

    oracle_depth: int = Field(default=5, ge=1, le=8, description="Plies the alpha-beta oracle searches.")


@dataclass(frozen=True, slots=True)
class ConnectFourState:
    """The columns (marks from the bottom up) and the column played last (None at the start)."""

    columns: rules.Columns
    last: int | None = None


class ConnectFour(RulesGame[ConnectFourState, int]):
    """Connect Four for two players; an action is a column index 0..6 (text ``1``..``7``).

    Example:
        >>> game = ConnectFour()
        >>> _ = game.reset(seed=0)
        >>> game.step({"player_0": "4"}).infos["player_0"]["action"]
        '4'
        >>> game.oracle_action("player_1")
        '4'
    """

    Config = ConnectFourConfig
    outcome = "win_draw_loss"
    config: ConnectFourConfig
    AGENTS = ("player_0", "player_1")

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> ConnectFourState:
        """The empty board."""
        return ConnectFourState(rules.EMPTY_BOARD)

    def transition(
        self, state: ConnectFourState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[ConnectFourState, Mapping[AgentID, float]]:
        """Drop the piece; +1 to the player completing four in a line, -1 to the other."""
        mark = rules.mark_to_move(state.columns)
        mover = self.AGENTS[mark - 1]
        col = actions[mover]
        columns = rules.drop(state.columns, col, mark)
        if rules.has_four(rules.bitboard(columns, mark)):
            return ConnectFourState(columns, col), {mover: 1.0, self.AGENTS[2 - mark]: -1.0}
        return ConnectFourState(columns, col), {}

    def is_terminal(self, state: ConnectFourState) -> bool:
        """Four in a line or a full board."""
        return rules.is_over(state.columns)

    def current_agents(self, state: ConnectFourState) -> tuple[AgentID, ...]:
        """The player to move (none once the game is over)."""
        if rules.is_over(state.columns):
            return ()
        return (self.AGENTS[rules.mark_to_move(state.columns) - 1],)

    def legal_moves(self, state: ConnectFourState, agent: AgentID) -> Sequence[int]:
        """Open columns, for the player to move only."""
        return rules.legal_columns(state.columns) if agent in self.current_agents(state) else ()

    def success(self, state: ConnectFourState, agent: AgentID) -> bool:
        """Success means winning."""
        return rules.winner(state.columns) == self.AGENTS.index(agent) + 1

    def oracle(self, state: ConnectFourState, agent: AgentID) -> int | None:
        """Depth-limited alpha-beta search (``oracle_depth`` plies, 5 by default)."""
        if agent not in self.current_agents(state):
            return None
        return rules.best_move(state.columns, self.config.oracle_depth)

    def key(self, state: ConnectFourState, agent: AgentID) -> Hashable:
        """The columns identify the state (both players see everything)."""
        return state.columns

    # ------------------------------------------------------------------ text layer
    def render(self, state: ConnectFourState, agent: AgentID) -> str:
        """Who plays which mark, the grid with column numbers, the last move and what to answer."""
        mine = self.AGENTS.index(agent) + 1
        other_agent = self.AGENTS[2 - mine]
        other = f"{other_agent} ({rules.MARK_NAMES[3 - mine]})"
        lines = [
            f"Connect Four on a board of {rules.ROWS} rows and {rules.COLS} columns. You are {agent} and play "
            f"{rules.MARK_NAMES[mine]}; {other_agent} plays {rules.MARK_NAMES[3 - mine]}. X moves first.",
            "A piece drops to the lowest empty cell of its column. Four in a row, column or diagonal wins.",
            "Grid (top row first; . = empty):",
            "",
            _grid(state.columns),
            "",
        ]
        if state.last is not None:
            last_mark = state.columns[state.last][-1]
            lines.append(f"{'You' if last_mark == mine else other} last played column {state.last + 1}.")
        won = rules.winner(state.columns)
        if won != rules.EMPTY:
            lines.append("Game over: you won." if won == mine else f"Game over: {other} won.")
        elif rules.is_full(state.columns):
            lines.append("Game over: draw (the board is full).")
        elif rules.mark_to_move(state.columns) == mine:
            open_columns = ", ".join(str(col + 1) for col in rules.legal_columns(state.columns))
            lines.append(f"It is your turn ({rules.MARK_NAMES[mine]}). Answer with a column number: {open_columns}.")
        else:
            lines.append(f"It is the turn of {other}; wait for your turn.")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: ConnectFourState | None) -> int | Invalid:
        """A column number 1-7 with room left in ``state``."""
        words = normalize_answer(text)
        match = None if words is None else _COLUMN.fullmatch(words)
        if match is None:
            return Invalid(f"{_EXPECTED}; got {quote(text)}")
        col = int(match.group(1)) - 1
        if state is not None:
            if rules.is_over(state.columns):
                return Invalid("the game is over")
            if agent not in self.current_agents(state):
                return Invalid(f"it is not {agent}'s turn")
            if len(state.columns[col]) >= rules.ROWS:
                open_columns = ", ".join(str(c + 1) for c in rules.legal_columns(state.columns))
                return Invalid(f"column {col + 1} is full; open columns: {open_columns}")
        return col

    def action_text(self, agent: AgentID, action: int) -> str:
        """The column number, 1-7."""
        return str(action + 1)


def _grid(columns: rules.Columns) -> str:
    header = " " + " ".join(str(col + 1) for col in range(rules.COLS))
    rows = [
        "|" + " ".join(rules.MARK_NAMES[rules.cell(columns, row, col)] for col in range(rules.COLS)) + "|"
        for row in reversed(range(rules.ROWS))
    ]
    return "\n".join([header, *rows, "+" + "-" * (2 * rules.COLS - 1) + "+"])


class ConnectFourVsConfig(ConnectFourConfig, OpponentConfig):
    """Options of Connect Four against a fixed opponent."""


class ConnectFourVsMinimax(VsFixedOpponent[ConnectFourState, int]):
    """Connect Four for one agent against the depth-limited alpha-beta oracle.

    Example:
        >>> game = ConnectFourVsMinimax(learner_seat="player_1")
        >>> observations, _ = game.reset(seed=0)
        >>> observations["player"].splitlines()[-2]
        'player_0 (X) last played column 3.'
    """

    Inner = ConnectFour
    OPPONENT = "a depth-limited alpha-beta (minimax) player"
    Config = ConnectFourVsConfig
    config: ConnectFourVsConfig
