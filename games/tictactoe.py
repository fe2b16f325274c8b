"""Tic-tac-toe as a two-player text game, and a single-agent variant against perfect minimax.

Rules are in :mod:`games.tictactoe_rules`. ``player_0`` plays X and moves first, ``player_1``
plays O. A win scores +1 for the winner and -1 for the loser, a draw 0.

Answers name a cell. The canonical form is the cell number ``1``..``9``, row by row from the
top-left (the board shows the numbers of the empty cells). Also accepted, in any case and with
surrounding spaces or punctuation: ``cell 5`` / ``square 5`` / ``#5``; ``row column`` pairs of
1..3 such as ``2 3``, ``(2, 3)`` or ``row 2 column 3``; and the names ``top-left``, ``top``,
``top-right``, ``left``, ``center`` (``centre``, ``middle``), ``right``, ``bottom-left``,
``bottom``, ``bottom-right`` (``top middle``, ``middle left``, ... too).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from games import tictactoe_rules as rules
from games.opponents import CheckedRulesGame, OpponentConfig, VsFixedOpponent, normalize_answer, quote
from tsmg.core import AgentID, GameConfig, Invalid

_EXPECTED = "expected the number 1-9 of an empty cell (1 = top-left, 9 = bottom-right, row by row)"
_NUMBER = re.compile(r"(?:cell|square|position|pos|move)?\s*#?\s*([1-9])", re.ASCII)
_ROW_COLUMN = re.compile(r"(?:row\s*)?([1-3])\s*(?:,\s*|\s+)(?:col(?:umn)?\s*)?([1-3])", re.ASCII)
_ROWS = {"top": 0, "upper": 0, "middle": 1, "center": 1, "bottom": 2, "lower": 2}
_COLUMNS = {"left": 0, "middle": 1, "center": 1, "right": 2}


def _named_cell(words: str) -> int | None:
    """Cell index of names like 'top left', 'center', 'right', 'bottom middle'."""
    parts = words.replace("-", " ").replace("_", " ").replace("centre", "center").split()
    if len(parts) == 1:
        word = parts[0]
        if word in ("center", "middle"):
            return 4
        if word in ("top", "upper", "bottom", "lower"):
            return 3 * _ROWS[word] + 1
        if word in ("left", "right"):
            return 3 + _COLUMNS[word]
        return None
    if len(parts) == 2 and parts[0] in _ROWS and parts[1] in _COLUMNS:
        return 3 * _ROWS[parts[0]] + _COLUMNS[parts[1]]
    return None


class TicTacToeConfig(GameConfig):
    """Options of tic-tac-toe (none beyond the common ones)."""


@dataclass(frozen=True, slots=True)
class TicTacToeState:
    """The board and the cell played last (None at the start)."""

    board: rules.Board
    last: int | None = None


class TicTacToe(CheckedRulesGame[TicTacToeState, int]):
    """Tic-tac-toe for two players; an action is a cell index 0..8 (text ``1``..``9``).

    Example:
        >>> game = TicTacToe()
        >>> _ = game.reset(seed=0)
        >>> game.step({"player_0": "center"}).infos["player_0"]
        {'valid': True, 'reason': None, 'action': '5'}
        >>> game.parse("player_1", "5")
        Invalid(reason='cell 5 is already taken by X; empty cells: 1, 2, 3, 4, 6, 7, 8, 9')
    """

    Config = TicTacToeConfig
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
        """Who plays which mark, the numbered board, the last move, and what to answer."""
        mine = self.AGENTS.index(agent) + 1
        other_agent = self.AGENTS[2 - mine]
        other = f"{other_agent} ({rules.MARK_NAMES[3 - mine]})"
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
        won = rules.winner(state.board)
        if won != rules.EMPTY:
            lines.append("Game over: you won." if won == mine else f"Game over: {other} won.")
        elif rules.is_full(state.board):
            lines.append("Game over: draw.")
        elif rules.mark_to_move(state.board) == mine:
            cells = ", ".join(str(cell + 1) for cell in rules.legal_cells(state.board))
            lines.append(
                f"It is your turn ({rules.MARK_NAMES[mine]}). Answer with the number of an empty cell: {cells}."
            )
        else:
            lines.append(f"It is the turn of {other}; wait for your turn.")
        return "\n".join(lines)

    def parse_in_state(self, agent: AgentID, text: str, state: TicTacToeState | None) -> int | Invalid:
        """A cell number 1-9 (or a documented variant) that is empty in ``state``."""
        words = normalize_answer(text)
        cell = None if words is None else _cell_of(words)
        if cell is None:
            return Invalid(f"{_EXPECTED}; got {quote(text)}")
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


def _cell_of(words: str) -> int | None:
    if match := _NUMBER.fullmatch(words):
        return int(match.group(1)) - 1
    if match := _ROW_COLUMN.fullmatch(words):
        return 3 * (int(match.group(1)) - 1) + int(match.group(2)) - 1
    return _named_cell(words)


def _grid(board: rules.Board) -> str:
    rows = []
    for row in range(3):
        cells = [
            rules.MARK_NAMES[m] if m else str(3 * row + col + 1) for col, m in enumerate(board[3 * row : 3 * row + 3])
        ]
        rows.append(" " + " | ".join(cells))
    return "\n---+---+---\n".join(rows)


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
