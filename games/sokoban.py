"""Sokoban as a text game: levels generated from the seed (solvable by construction) or fixed classics.

Rules, the generator and the solver are in :mod:`games.sokoban_rules`; fixed levels in
:mod:`games.sokoban_levels`. Rewards: +1 for each box pushed onto a goal, -1 for each box
pushed off one, +10 (``solved_reward``) when every box is on a goal, minus ``step_penalty``
(default 0) every round. The episode terminates when the level is solved; ``max_steps``
truncates. The oracle plays an optimal (fewest-moves) solution found by A* search.

The text gives the legend, the coordinate convention ((0, 0) bottom-left, x right, y up, as in
Frozen Lake), the coordinates of the player, boxes and goals, then a grid (``#`` wall, ``_``
floor, ``.`` goal, ``B`` box, ``*`` box on a goal, ``P`` player, ``+`` player on a goal).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from games import sokoban_rules as rules
from games.sokoban_levels import CLASSIC_LEVELS
from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_MOVES = MoveNames.indexed(rules.MOVE_NAMES)

LevelName = Literal["random", "classic", "microban-1", "microban-2", "microban-3", "microban-4", "microban-5"]
_PLAN_CACHE_LIMIT = 100_000


class SokobanConfig(GameConfig):
    """Options of Sokoban."""

    level: LevelName = Field(
        default="random",
        description="'random': a level generated from the seed; 'classic': a fixed level picked by the seed; "
        "or the name of a fixed level.",
    )
    size: int = Field(default=6, ge=5, le=12, description="Side of generated levels, outer wall included.")
    min_boxes: int = Field(default=1, ge=1, le=6, description="Fewest boxes in a generated level.")
    max_boxes: int = Field(default=2, ge=1, le=6, description="Most boxes in a generated level (drawn uniformly).")
    walk_steps: int = Field(
        default=30,
        ge=4,
        le=400,
        description="Steps of the reverse walk that scatters the boxes; a generated level is solvable in at most "
        "this many moves, so keep it <= max_steps.",
    )
    solved_reward: float = Field(default=10.0, description="Reward when the last box reaches a goal.")
    step_penalty: float = Field(default=0.0, ge=0.0, description="Subtracted from the reward every round.")
    solver_max_states: int = Field(
        default=200_000, ge=1_000, description="Search states after which the oracle gives up (then plays a fallback)."
    )

    @model_validator(mode="after")
    def _check_boxes(self) -> SokobanConfig:
        if self.min_boxes > self.max_boxes:
            raise ValueError(f"min_boxes ({self.min_boxes}) exceeds max_boxes ({self.max_boxes})")
        if self.max_boxes + 4 > (self.size - 2) ** 2:
            raise ValueError(f"{self.max_boxes} boxes do not fit in a {self.size}x{self.size} level")
        return self


class Sokoban(RulesGame[rules.SokobanState, int]):
    """Push every box onto a goal. Solved levels terminate; ``max_steps`` truncates.

    Success means every box is on a goal.

    Example:
        >>> game = Sokoban(level="microban-2", max_steps=40)
        >>> observations, _ = game.reset(seed=0)
        >>> print(observations["player"].splitlines()[2])
        You are at (3, 4). Boxes at (2, 3), (3, 2) on a goal, (3, 3) on a goal. Goals at (2, 2), (3, 2), (3, 3).
        >>> game.oracle_action("player")
        'right'
    """

    Config = SokobanConfig
    config: SokobanConfig
    AGENTS = ("player",)

    def __init__(self, config: SokobanConfig | None = None, **options: Any) -> None:
        """Build the game from a config or keyword options; the oracle's plans are cached per state."""
        super().__init__(config, **options)
        self._plans: dict[tuple[rules.Level, int, frozenset[int]], int] = {}

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> rules.SokobanState:
        """A level generated from ``rng``, or a fixed level (``classic`` picks one with ``rng``).

        ``options`` may name a ``level`` for this episode, or give XSB ``rows`` of a custom level.
        """
        config = self.config
        if "rows" in options:
            return rules.parse_level(tuple(options["rows"]), "custom")
        name = str(options.get("level", config.level))
        if name == "random":
            boxes = int(rng.integers(config.min_boxes, config.max_boxes + 1))
            return rules.generate(rng, config.size, boxes, config.walk_steps)
        if name == "classic":
            name = sorted(CLASSIC_LEVELS)[int(rng.integers(len(CLASSIC_LEVELS)))]
        if name not in CLASSIC_LEVELS:
            raise ValueError(f"unknown level {name!r}: use 'random', 'classic' or one of {sorted(CLASSIC_LEVELS)}")
        return _classic(name)

    def transition(
        self, state: rules.SokobanState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[rules.SokobanState, Mapping[AgentID, float]]:
        """Walk or push; reward box moves onto/off goals and solving."""
        state, push = rules.move(state, actions["player"])
        reward = rules.push_reward(state.level, push) - self.config.step_penalty
        if push is not None and rules.solved(state):
            reward += self.config.solved_reward
        return state, {"player": reward}

    def is_terminal(self, state: rules.SokobanState) -> bool:
        """The episode ends when every box is on a goal."""
        return rules.solved(state)

    def legal_moves(self, state: rules.SokobanState, agent: AgentID) -> Sequence[int]:
        """All four moves are always legal (into a wall or a stuck box nothing happens)."""
        return rules.MOVES

    def success(self, state: rules.SokobanState, agent: AgentID) -> bool:
        """Every box is on a goal."""
        return rules.solved(state)

    def oracle(self, state: rules.SokobanState, agent: AgentID) -> int:
        """The next move of an optimal solution (A*, cached along the plan for later states).

        If the level is unsolvable from ``state`` (a box stuck) or the search exceeds
        ``solver_max_states``, the fallback is the first move that changes the state.
        """
        key = (state.level, state.player, state.boxes)
        if key not in self._plans:
            if len(self._plans) > _PLAN_CACHE_LIMIT:
                self._plans.clear()
            plan = rules.solve(state, self.config.solver_max_states)
            if not plan:
                return next((m for m in rules.MOVES if rules.move(state, m)[0] != state), rules.UP)
            for move in plan:
                self._plans[(state.level, state.player, state.boxes)] = move
                state = rules.move(state, move)[0]
        return self._plans[key]

    def key(self, state: rules.SokobanState, agent: AgentID) -> Hashable:
        """Level name, the walls and goals (for generated levels), the player and the boxes."""
        level = state.level
        return level.name, level.walls.hex(), tuple(sorted(level.goals)), state.player, tuple(sorted(state.boxes))

    @property
    def has_random_start(self) -> bool:
        """Generated levels (and the classic pick) differ between seeds; a named level does not."""
        return self.config.level in ("random", "classic")

    # ------------------------------------------------------------------ text layer
    def render(self, state: rules.SokobanState, agent: AgentID) -> str:
        """Legend and convention, coordinates of player, boxes and goals, the grid, the actions."""
        level = state.level
        header, goals_text = _static_text(level)
        ordered = sorted(state.boxes, key=lambda b: _coords(level, b))
        boxes = ", ".join(_xy(level, b) + (" on a goal" if b in level.goals else "") for b in ordered)
        rows = []
        for row in range(level.height):
            chars = []
            for cell in range(row * level.width, (row + 1) * level.width):
                on_goal = cell in level.goals
                if level.walls[cell]:
                    chars.append("#")
                elif cell == state.player:
                    chars.append("+" if on_goal else "P")
                elif cell in state.boxes:
                    chars.append("*" if on_goal else "B")
                else:
                    chars.append("." if on_goal else "_")
            rows.append("".join(chars))
        grid = "\n".join(rows)
        where = f"You are at {_xy(level, state.player)}. Boxes at {boxes}. {goals_text}"
        return f"{header}\n{where}\n{grid}\n{_footer(self.config.solved_reward, self.config.step_penalty)}"

    def parse_action(self, agent: AgentID, text: str, state: rules.SokobanState | None) -> int | Invalid:
        """A move's name (any case, surrounding punctuation aside); every move is legal while the game lasts."""
        return _MOVES.read(text)

    def action_text(self, agent: AgentID, action: int) -> str:
        """The move's name."""
        return rules.MOVE_NAMES[action]


@lru_cache(maxsize=64)
def _classic(name: str) -> rules.SokobanState:
    return rules.parse_level(CLASSIC_LEVELS[name], name)


def _coords(level: rules.Level, cell: int) -> tuple[int, int]:
    row, col = divmod(cell, level.width)
    return col, level.height - 1 - row


def _xy(level: rules.Level, cell: int) -> str:
    return "({}, {})".format(*_coords(level, cell))


@lru_cache(maxsize=1024)
def _static_text(level: rules.Level) -> tuple[str, str]:
    """Parts of the observation that depend only on the level."""
    header = (
        f"Sokoban on a {level.width}x{level.height} grid. Coordinates are (x, y): x counts columns from the left, "
        "y counts rows from the bottom, so (0, 0) is the bottom-left corner; up adds 1 to y, right adds 1 to x.\n"
        "Legend (grid rows are printed top row first): # = wall, _ = floor, . = goal, B = box, * = box on a goal, "
        "P = you, + = you on a goal."
    )
    goals = "Goals at " + ", ".join(_xy(level, g) for g in sorted(level.goals, key=lambda g: _coords(level, g))) + "."
    return header, goals


@lru_cache(maxsize=64)
def _footer(solved_reward: float, step_penalty: float) -> str:
    cost = f" Every move costs {step_penalty:g}." if step_penalty else ""
    return (
        "Push every box onto a goal: walking into a box pushes it one cell if the cell behind it is free; "
        "you cannot pull boxes or push two at once. +1 per box pushed onto a goal, -1 per box pushed off one, "
        f"{solved_reward:+g} when all are on goals.{cost}\n"
        "Actions: up, down, left, right."
    )
