"""2048 as a single-player text game.

Rules are in :mod:`games.game2048_rules`. The game starts with two random tiles; the reward
of a move is the value of the tiles it merges (the classic score). The episode terminates when
no move changes the board; success means a tile of at least ``target`` (256 by default) on the
board at the end (tiles never shrink, so reaching it once is enough). The episode does not stop
at the target: the step cap of the registered variants truncates it.

All four moves are always legal actions, as in the original game's controls. A move that does
not change the board just uses the turn (no new tile, no reward); the observation names such
moves so a player can avoid them. Answers are ``up``, ``down``, ``left`` or ``right`` (any case,
surrounding punctuation aside).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from games import game2048_rules as rules
from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_MOVES = MoveNames.indexed(rules.MOVE_NAMES)


class Game2048Config(GameConfig):
    """Options of 2048."""

    target: int = Field(default=256, ge=4, description="Tile value that counts as success (a power of two).")

    @field_validator("target")
    @classmethod
    def _check_target(cls, target: int) -> int:
        if target & (target - 1):
            raise ValueError(f"target must be a power of two, got {target}")
        return target


@dataclass(frozen=True, slots=True)
class Game2048State:
    """The board (16 tiles row by row, 0 empty) and the score so far."""

    board: rules.Board
    score: int = 0


class Game2048(RulesGame[Game2048State, int]):
    """Slide tiles on a 4x4 board, merging equal ones; reward = merged value.

    Example:
        >>> game = Game2048()
        >>> observations, _ = game.reset(seed=0)
        >>> game.legal_actions("player")
        ['up', 'down', 'left', 'right']
        >>> game.parse("player", "north")
        Invalid(reason="expected one of up, down, left, right; got 'north'")
    """

    Config = Game2048Config
    config: Game2048Config
    AGENTS = ("player",)

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Game2048State:
        """An empty board with two random tiles."""
        return Game2048State(rules.new_board(rng))

    def transition(
        self, state: Game2048State, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[Game2048State, Mapping[AgentID, float]]:
        """Slide; if the board changed, add a random tile. Reward: the merged value."""
        board, points = rules.move(state.board, actions["player"])
        if board == state.board:
            return state, {"player": 0.0}
        return Game2048State(rules.spawn(board, rng), state.score + points), {"player": float(points)}

    def is_terminal(self, state: Game2048State) -> bool:
        """No move changes the board."""
        return not rules.can_move(state.board)

    def legal_moves(self, state: Game2048State, agent: AgentID) -> Sequence[int]:
        """All four moves (a move that changes nothing just uses the turn); none once the game is over."""
        return () if self.is_terminal(state) else (rules.UP, rules.DOWN, rules.LEFT, rules.RIGHT)

    def success(self, state: Game2048State, agent: AgentID) -> bool:
        """A tile of at least ``target`` is on the board."""
        return rules.max_tile(state.board) >= self.config.target

    def oracle(self, state: Game2048State, agent: AgentID) -> int:
        """One-ply expectimax over the random tile with a monotonicity/empty-cell heuristic."""
        return rules.best_move(state.board)

    def key(self, state: Game2048State, agent: AgentID) -> Hashable:
        """The board alone decides the future (the score is only the past)."""
        return state.board

    @property
    def has_random_start(self) -> bool:
        """The two starting tiles depend on the seed."""
        return True

    # ------------------------------------------------------------------ text layer
    def render(self, state: Game2048State, agent: AgentID) -> str:
        """Rules, score, the board (. = empty), and which moves would change nothing."""
        width = max(len(str(value)) for value in state.board)
        rows = [
            " ".join(str(value or ".").rjust(width) for value in state.board[r * rules.SIZE : (r + 1) * rules.SIZE])
            for r in range(rules.SIZE)
        ]
        lines = [
            "2048 on a 4x4 board. A move slides every tile as far as possible in that direction; two equal tiles "
            "that meet merge into one tile of their sum (each tile merges at most once per move), and the merged "
            "value is added to your score. After each move that changes the board a new tile (2, or sometimes 4) "
            f"appears on an empty cell. Goal: make a tile of {self.config.target}.",
            f"Score: {state.score}. Largest tile: {rules.max_tile(state.board)}.",
            "Board (. = empty):",
            *rows,
        ]
        if self.is_terminal(state):
            lines.append("Game over: no move changes the board.")
        else:
            idle = [rules.MOVE_NAMES[d] for d in range(4) if not rules.changes(state.board, d)]
            if idle:
                lines.append(f"These moves would change nothing and just use a turn: {', '.join(idle)}.")
            lines.append("Answer up, down, left or right.")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: Game2048State | None) -> int | Invalid:
        """up, down, left or right; all four are legal while the game lasts."""
        direction = _MOVES.read(text)
        if isinstance(direction, Invalid):
            return direction
        if state is not None and self.is_terminal(state):
            return Invalid("the game is over")
        return direction

    def action_text(self, agent: AgentID, action: int) -> str:
        """The move's name."""
        return rules.MOVE_NAMES[action]
