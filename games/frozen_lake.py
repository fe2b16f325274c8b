"""Frozen Lake as a text game, with the variants of the MS-GRPO work.

Rules are in :mod:`games.frozen_lake_rules`; this module adds the text layer (what the player
reads, how its answer is parsed) and the options. The text follows the MS-GRPO authors' public
environment: board size, the coordinate convention ((0, 0) bottom-left), the coordinates of the
player, the goal and the holes, then a grid (P player, O hole, G goal, _ frozen).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from games import frozen_lake_rules as rules
from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_MOVES = MoveNames.indexed(rules.MOVE_NAMES)


class FrozenLakeConfig(GameConfig):
    """Options of Frozen Lake."""

    map_name: Literal["4x4", "8x8", "random"] = Field(
        default="random", description="Gymnasium's fixed 4x4/8x8 map, or a random map per episode."
    )
    size: int = Field(default=4, ge=2, le=16, description="Side of random maps.")
    p_frozen: float = Field(default=0.8, gt=0.0, le=1.0, description="Probability a random tile is frozen.")
    is_slippery: bool = Field(default=False, description="Moves slip sideways with probability 2/3.")
    desc: tuple[str, ...] | None = Field(default=None, description="A fixed map (rows of S/F/H/G), top row first.")
    shaping: Literal["none", "distance"] = Field(
        default="none",
        description=(
            "Potential-based reward shaping (Ng, Harada & Russell 1999): 'distance' adds F = shaping_gamma * "
            "Phi(s') - Phi(s) to each move's reward, Phi = -(shortest-path distance to the goal), 0 in a hole or at "
            "the goal; it leaves the optimal policy unchanged. 'none': the goal's 1 only."
        ),
    )
    shaping_gamma: float = Field(
        default=1.0, gt=0.0, le=1.0, description="The discount in the shaping term F = gamma Phi(s') - Phi(s)."
    )

    @field_validator("desc")
    @classmethod
    def _check_desc(cls, desc: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if desc is not None:
            _validate_map(desc)
        return desc

    @model_validator(mode="after")
    def _gamma_needs_shaping(self) -> FrozenLakeConfig:
        if self.shaping_gamma != 1.0 and self.shaping == "none":
            raise ValueError("shaping_gamma only applies to shaping 'distance' (shaping is 'none')")
        return self


@dataclass(frozen=True, slots=True)
class FrozenLakeState:
    """The map and where the player stands (row, col; row 0 is the top row)."""

    desc: rules.Map
    position: rules.Position


class FrozenLake(RulesGame[FrozenLakeState, int]):
    """Reach the goal across a frozen lake without falling into a hole. Reward 1 at the goal.

    Example:
        >>> game = FrozenLake(map_name="4x4", max_steps=16)
        >>> observations, _ = game.reset(seed=0)
        >>> print(observations["player"].splitlines()[1])
        You are at (0, 3). The goal is at (3, 0). Holes are at (1, 2), (3, 2), (3, 1), (0, 0).
        >>> game.step({"player": "right"}).infos["player"]
        {'valid': True, 'reason': None, 'action': 'right'}
    """

    Config = FrozenLakeConfig
    config: FrozenLakeConfig
    AGENTS = ("player",)

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> FrozenLakeState:
        """Pick the episode's map (fixed, given in options, or random) and start at S."""
        config = self.config
        if "desc" in options:
            desc = tuple(options["desc"])
            _validate_map(desc)
        elif config.desc is not None:
            desc = config.desc
        elif config.map_name == "4x4":
            desc = rules.STANDARD_4X4
        elif config.map_name == "8x8":
            desc = rules.STANDARD_8X8
        else:
            desc = rules.generate_random_map(rng, config.size, config.p_frozen)
        return FrozenLakeState(desc=desc, position=(0, 0))

    def transition(
        self, state: FrozenLakeState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[FrozenLakeState, Mapping[AgentID, float]]:
        """Move (slipping if the ice is slippery); reward 1 on reaching the goal, plus the shaping term if asked."""
        action = actions["player"]
        if self.config.is_slippery:
            action = rules.slip(action, rng)
        position = rules.move(state.desc, state.position, action)
        reward = 1.0 if rules.tile(state.desc, position) == "G" else 0.0
        if self.config.shaping == "distance":
            gamma = self.config.shaping_gamma
            reward += gamma * rules.potential(state.desc, position) - rules.potential(state.desc, state.position)
        return FrozenLakeState(state.desc, position), {"player": reward}

    def is_terminal(self, state: FrozenLakeState) -> bool:
        """The episode ends in a hole or at the goal."""
        return rules.tile(state.desc, state.position) in "HG"

    def legal_moves(self, state: FrozenLakeState, agent: AgentID) -> Sequence[int]:
        """All four moves are always legal (a wall just keeps the player in place)."""
        return (rules.LEFT, rules.DOWN, rules.RIGHT, rules.UP)

    def success(self, state: FrozenLakeState, agent: AgentID) -> bool:
        """Success means standing on the goal."""
        return rules.tile(state.desc, state.position) == "G"

    def oracle(self, state: FrozenLakeState, agent: AgentID) -> int:
        """Shortest path without slipping; finite-horizon value iteration with slipping."""
        max_steps = self.config.max_steps
        steps_left = None if max_steps is None else max_steps - self.rounds
        return rules.optimal_action(state.desc, state.position, steps_left, self.config.is_slippery)

    def key(self, state: FrozenLakeState, agent: AgentID) -> Hashable:
        """The map and the position identify the state."""
        return (state.desc, state.position)

    @property
    def has_random_start(self) -> bool:
        """Random maps differ between seeds; fixed maps do not."""
        return self.config.desc is None and self.config.map_name == "random"

    # ------------------------------------------------------------------ text layer
    def render(self, state: FrozenLakeState, agent: AgentID) -> str:
        """Board size and convention, coordinates of player, goal and holes, then the grid."""
        header, grid_rows, footer = _static_text(state.desc, self.config.is_slippery)
        size = len(state.desc)
        row, col = state.position
        rows = list(grid_rows)
        rows[row] = rows[row][:col] + "P" + rows[row][col + 1 :]
        grid = "\n".join(rows)
        return f"{header}You are at ({col}, {size - 1 - row}).{_goal_and_holes(state.desc)}\n{grid}\n{footer}"

    def parse_action(self, agent: AgentID, text: str, state: FrozenLakeState | None) -> int | Invalid:
        """A move's name (any case, surrounding punctuation aside); every move is legal while the game lasts."""
        return _MOVES.read(text)

    def action_text(self, agent: AgentID, action: int) -> str:
        """The move's name."""
        return rules.MOVE_NAMES[action]


def _validate_map(desc: tuple[str, ...]) -> None:
    size = len(desc)
    if size < 2 or any(len(row) != size for row in desc):
        raise ValueError("desc must be a square map of at least 2x2 (rows of equal length)")
    letters = "".join(desc)
    if set(letters) - set("SFHG") or letters.count("S") != 1 or letters.count("G") != 1:
        raise ValueError("desc uses S (start), F (frozen), H (hole), G (goal), with exactly one S and one G")
    if desc[0][0] != "S":
        raise ValueError("the start S must be the top-left tile")


@lru_cache(maxsize=4096)
def _static_text(desc: rules.Map, slippery: bool) -> tuple[str, tuple[str, ...], str]:
    """Parts of the observation that depend only on the map (rendered once per map)."""
    size = len(desc)
    header = (
        f"Frozen Lake on a {size}x{size} board. Coordinates are (x, y): x counts columns from the left, "
        f"y counts rows from the bottom, so (0, 0) is the bottom-left corner.\n"
    )
    grid_rows = tuple(row.replace("S", "_").replace("F", "_").replace("H", "O") for row in desc)
    footer = "Reach the goal without falling into a hole."
    if slippery:
        footer += " The ice is slippery: a move may slide you sideways instead."
    footer += "\nActions: left, down, right, up."
    return header, grid_rows, footer


@lru_cache(maxsize=4096)
def _goal_and_holes(desc: rules.Map) -> str:
    size = len(desc)
    holes = [f"({c}, {size - 1 - r})" for r in range(size) for c in range(size) if desc[r][c] == "H"]
    goal = next(f"({c}, {size - 1 - r})" for r in range(size) for c in range(size) if desc[r][c] == "G")
    hole_text = f" Holes are at {', '.join(holes)}." if holes else " There are no holes."
    return f" The goal is at {goal}.{hole_text}\nGrid (top row first; P = you, O = hole, G = goal, _ = frozen):"
