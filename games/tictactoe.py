"""Tic-tac-toe as a two-player text game, and a single-agent variant against perfect minimax.

Rules are in :mod:`games.tictactoe_rules`. ``player_0`` plays X and moves first, ``player_1``
plays O. A win scores +1 for the winner and -1 for the loser, a draw 0.

Answers name a cell by its number ``1``..``9``, row by row from the top-left (the board shows
the numbers of the empty cells), surrounding spaces or punctuation aside: the answer rule of
:mod:`tsmg.answers`. Names such as ``center`` or ``top left`` are not answers, since the prompt
does not announce them.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from games import tictactoe_rules as rules
from games.opponents import OpponentConfig, VsFixedOpponent
from games.views import ViewConfig
from tsmg.answers import normalize_answer, quote
from tsmg.core import AgentID, Invalid, RulesGame

_EXPECTED = "expected the number 1-9 of an empty cell (1 = top-left, 9 = bottom-right, row by row)"
_CELL = re.compile(r"[1-9]", re.ASCII)


class TicTacToeConfig(ViewConfig):
    """Options of tic-tac-toe: the common ones and the observation's ``view``."""


@dataclass(frozen=True, slots=True)
class TicTacToeState:
    """The board and the cell played last (None at the start)."""

    board: rules.Board
    last: int | None = None


class TicTacToe(RulesGame[TicTacToeState, int]):
    """Tic-tac-toe for two players; an action is a cell index 0..8 (text ``1``..``9``).

    Example:
        >>> game = TicTacToe()
        >>> _ = game.reset(seed=0)
        >>> game.step({"player_0": "5"}).infos["player_0"]
        {'valid': True, 'reason': None, 'action': '5'}
        >>> game.parse("player_1", "5")
        Invalid(reason='cell 5 is already taken by X; empty cells: 1, 2, 3, 4, 6, 7, 8, 9')
    """

    Config = TicTacToeConfig
    outcome = "win_draw_loss"
    config: TicTacToeConfig
    AGENTS = ("player_0", "player_1")

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> TicTacToeState:
        """The empty board."""
        return TicTacToeState(rules.EMPTY_BOARD)

    def transition(
        self, state: TicTacToeState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[TicTacToeState, Mapping[AgentID, float]]:
        """Mark the cell; +1 to the player completing a line, -1 to the other."""
        mark = rules.mark_to_move(state.board)
        mover = self.AGENTS[mark - 1]
        board = rules.play(state.board, actions[mover], mark)
        if rules.winner(board) == mark:
            other = self.AGENTS[2 - mark]
            return TicTacToeState(board, actions[mover]), {mover: 1.0, other: -1.0}
        return TicTacToeState(board, actions[mover]), {}

    def is_terminal(self, state: TicTacToeState) -> bool:
        """A line of three or a full board."""
        return rules.is_over(state.board)

    def current_agents(self, state: TicTacToeState) -> tuple[AgentID, ...]:
        """The player to move (none once the game is over)."""
        if rules.is_over(state.board):
            return ()
        return (self.AGENTS[rules.mark_to_move(state.board) - 1],)

    def legal_moves(self, state: TicTacToeState, agent: AgentID) -> Sequence[int]:
        """The empty cells, for the player to move only."""
        return rules.legal_cells(state.board) if agent in self.current_agents(state) else ()

    def success(self, state: TicTacToeState, agent: AgentID) -> bool:
        """Success means winning."""
        return rules.winner(state.board) == self.AGENTS.index(agent) + 1

    def oracle(self, state: TicTacToeState, agent: AgentID) -> int | None:
        """Perfect play (memoised minimax), preferring the fastest win and the slowest loss."""
        return rules.best_move(state.board) if agent in self.current_agents(state) else None

    def key(self, state: TicTacToeState, agent: AgentID) -> Hashable:
        """The board identifies the state (both players see everything)."""
        return state.board

    # ------------------------------------------------------------------ text layer
    def render(self, state: TicTacToeState, agent: AgentID) -> str:
        """Who plays which mark, the numbered board, the last move, and what to answer.

        With ``view="compact"``: the board's three rows and the line saying whose turn it is (or
        the result), e.g. `` X | 2 | 3``, `` 4 | O | 6``, `` 7 | 8 | 9``, then ``It is your turn
        (X). Answer with the number of an empty cell: 2, 3, 4, 6, 7, 8, 9.``
        """
        mine = self.AGENTS.index(agent) + 1
        other_agent = self.AGENTS[2 - mine]
        other = f"{other_agent} ({rules.MARK_NAMES[3 - mine]})"
        if self.config.view == "compact":
            return "\n".join([*_rows(state.board), _status(state.board, mine, other)])
        lines = [
            f"Tic-tac-toe on a 3x3 board. You are {agent} and play {rules.MARK_NAMES[mine]}; "
            f"{other_agent} plays {rules.MARK_NAMES[3 - mine]}. X moves first. Three in a line (row, column, diagonal) "
            "wins.",
            "Cells are numbered 1-9 row by row from the top-left; empty cells show their number.",
            "",
            _grid(state.board),
            "",
        ]
        if state.last is not None:
            who = "You" if state.board[state.last] == mine else other
            lines.append(f"{who} last played cell {state.last + 1}.")
        lines.append(_status(state.board, mine, other))
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: TicTacToeState | None) -> int | Invalid:
        """A cell number 1-9 that is empty in ``state``."""
        cell = read_cell(text)
        if isinstance(cell, Invalid):
            return cell
        if state is not None:
            if rules.is_over(state.board):
                return Invalid("the game is over")
            if agent not in self.current_agents(state):
                return Invalid(f"it is not {agent}'s turn")
            if state.board[cell] != rules.EMPTY:
                empty = ", ".join(str(index + 1) for index in rules.legal_cells(state.board))
                taken = rules.MARK_NAMES[state.board[cell]]
                return Invalid(f"cell {cell + 1} is already taken by {taken}; empty cells: {empty}")
        return cell

    def action_text(self, agent: AgentID, action: int) -> str:
        """The cell number, 1-9."""
        return str(action + 1)


def read_cell(text: str) -> int | Invalid:
    """The cell (index 0-8) an answer names by its number 1-9, or :class:`Invalid`.

    Example:
        >>> read_cell(" 5. "), read_cell("center").reason
        (4, "expected the number 1-9 of an empty cell (1 = top-left, 9 = bottom-right, row by row); got 'center'")
    """
    words = normalize_answer(text)
    if words is None or not _CELL.fullmatch(words):
        return Invalid(f"{_EXPECTED}; got {quote(text)}")
    return int(words) - 1


def _rows(board: rules.Board) -> list[str]:
    """The board's rows, `` X | 2 | O``: a mark, or the number of an empty cell."""
    rows = []
    for row in range(3):
        cells = [
            rules.MARK_NAMES[m] if m else str(3 * row + col + 1) for col, m in enumerate(board[3 * row : 3 * row + 3])
        ]
        rows.append(" " + " | ".join(cells))
    return rows


def _grid(board: rules.Board) -> str:
    return "\n---+---+---\n".join(_rows(board))


def _status(board: rules.Board, mine: int, other: str) -> str:
    """The result, or whose turn it is (with the empty cells to answer when it is the reader's)."""
    won = rules.winner(board)
    if won != rules.EMPTY:
        return "Game over: you won." if won == mine else f"Game over: {other} won."
    if rules.is_full(board):
        return "Game over: draw."
    if rules.mark_to_move(board) == mine:
        cells = ", ".join(str(cell + 1) for cell in rules.legal_cells(board))
        return f"It is your turn ({rules.MARK_NAMES[mine]}). Answer with the number of an empty cell: {cells}."
    return f"It is the turn of {other}; wait for your turn."


class TicTacToeVsConfig(TicTacToeConfig, OpponentConfig):
    """Options of tic-tac-toe against a fixed opponent."""


class TicTacToeVsMinimax(VsFixedOpponent[TicTacToeState, int]):
    """Tic-tac-toe for one agent against perfect minimax (epsilon-random if asked); a draw is the best result.

    Example:
        >>> game = TicTacToeVsMinimax(learner_seat="player_1")
        >>> observations, _ = game.reset(seed=0)
        >>> observations["player"].splitlines()[-1]
        'It is your turn (O). Answer with the number of an empty cell: 2, 3, 4, 5, 6, 7, 8, 9.'
    """

    Inner = TicTacToe
    OPPONENT = "a perfect minimax player"
    Config = TicTacToeVsConfig
    config: TicTacToeVsConfig
