"""Snake as a text game: the MS-GRPO single-player variant (one random enemy) and a multi-agent arena.

Rules are in :mod:`games.snake_rules`. :class:`Snake` follows the MS-GRPO authors' public
environment: a 10x10 board, 5 apples, the player's snake and one enemy snake that moves
uniformly at random among its safe moves; +1 per apple (the snake grows by one), -1 on death
plus a death penalty (1 by default, so -2 in total, as in their configs); the episode ends when
at most one snake is alive, and step caps truncate. :class:`SnakeArena` makes every snake an
agent (2-4 of them, moving simultaneously).

The text gives the coordinate convention ((0, 0) bottom-left, x right, y up), the apples, every
snake's head and body, then a grid (1 = your head, 2... = other heads, T = body, A = apple,
_ = empty), the rules and the actions.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, model_validator

from games import snake_rules as rules
from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_MOVES = MoveNames.indexed(rules.MOVE_NAMES)


class SnakeConfig(GameConfig):
    """Options of single-player Snake."""

    size: int = Field(default=10, ge=4, le=26, description="Side of the square board.")
    num_apples: int = Field(default=5, ge=1, le=50, description="Apples on the board (an eaten apple respawns).")
    death_penalty: float = Field(
        default=1.0,
        ge=0.0,
        description="Subtracted on death on top of the -1 death reward (default: -2 in total, as in MS-GRPO).",
    )

    @model_validator(mode="after")
    def _check_room(self) -> SnakeConfig:
        if self.num_apples + 4 > self.size * self.size // 2:
            raise ValueError(f"{self.num_apples} apples do not fit on a {self.size}x{self.size} board")
        return self


class SnakeArenaConfig(SnakeConfig):
    """Options of the multi-agent Snake arena."""

    num_snakes: int = Field(default=2, ge=2, le=4, description="Number of snakes, every one an agent.")


class _SnakeGame(RulesGame[rules.Board, int]):
    """What both Snake games share: moves, parsing, rendering from one snake's point of view."""

    config: SnakeConfig

    def is_terminal(self, state: rules.Board) -> bool:
        """The game ends when at most one snake is alive."""
        return rules.alive_count(state) <= 1

    def legal_moves(self, state: rules.Board, agent: AgentID) -> Sequence[int]:
        """All four moves are always legal, deadly or not (legality is not safety)."""
        return rules.MOVES

    def forfeit(self, state: rules.Board, agent: AgentID) -> Mapping[AgentID, float]:
        """A forfeit scores as a death (-1 minus the death penalty), the worst a snake can do."""
        return {agent: -1.0 - self.config.death_penalty}

    def oracle(self, state: rules.Board, agent: AgentID) -> int:
        """The greedy baseline: a safe move toward the nearest apple (:func:`rules.greedy_move`)."""
        return rules.greedy_move(state, self._index(agent))

    @property
    def has_random_start(self) -> bool:
        """Snakes and apples are placed at random from the seed."""
        return True

    def parse_action(self, agent: AgentID, text: str, state: rules.Board | None) -> int | Invalid:
        """A move's name (any case, surrounding punctuation aside); every move is legal while the game lasts."""
        return _MOVES.read(text)

    def action_text(self, agent: AgentID, action: int) -> str:
        """The move's name."""
        return rules.MOVE_NAMES[action]

    def _index(self, agent: AgentID) -> int:
        return self.agents.index(agent)

    def _render(self, state: rules.Board, me: int, names: Mapping[int, str], you: str, extra: str = "") -> str:
        """The board as snake ``me`` (called ``you``) sees it; ``names`` names the other snakes."""
        size = state.size
        lines = [
            f"Snake on a {size}x{size} board. Coordinates are (x, y): x counts columns from the left, y counts "
            "rows from the bottom, so (0, 0) is the bottom-left corner; up adds 1 to y, right adds 1 to x.",
            "Apples at " + (", ".join(_xy(a) for a in sorted(state.apples)) or "nowhere") + ".",
        ]
        grid = [["_"] * size for _ in range(size)]
        for x, y in state.apples:
            grid[size - 1 - y][x] = "A"
        order = [me, *sorted(names)]
        for i in order:
            snake = state.snakes[i]
            label = you if i == me else names[i]
            if not snake.alive:
                lines.append(f"{label} is dead.")
                continue
            body = ", ".join(_xy(cell) for cell in snake.body[1:])
            body = f"body at {body}" if body else "no body yet"
            lines.append(f"{label}: head at {_xy(snake.head)}, {body}; {snake.apples} apple(s) eaten.")
            mark = "1" if i == me else str(order.index(i) + 1)
            for x, y in snake.body[1:]:
                grid[size - 1 - y][x] = "T"
            grid[size - 1 - snake.head[1]][snake.head[0]] = mark
        heads = "1 = your head, " + ", ".join(f"{order.index(i) + 1} = {names[i]}'s head" for i in sorted(names))
        lines.append(f"Grid (top row first; {heads}, T = snake body, A = apple, _ = empty):")
        lines.extend("".join(row) for row in grid)
        lines.append(
            "Every snake moves one cell per round, all at once. Eating an apple gives +1 and makes you one cell "
            "longer. Leaving the board, moving into any snake's body or into the same cell as another head kills "
            f"you ({-1.0 - self.config.death_penalty:+g}).{extra}"
        )
        lines.append("Actions: up, down, left, right.")
        return "\n".join(lines)


class Snake(_SnakeGame):
    """Eat apples and stay alive beside an enemy snake that moves at random among safe moves.

    The episode terminates when either snake dies; ``max_steps`` truncates (8 in MS-GRPO
    training). Success: the player is alive at the end and ate at least one apple. Under
    ``on_invalid="penalize"`` an invalid answer skips the round (neither snake moves);
    ``"default_action"`` plays ``up``, the first action, as the authors' code does.
    ``reset(options={"board": ...})`` starts from a given :class:`~games.snake_rules.Board`.

    Example:
        >>> game = Snake(max_steps=8)
        >>> observations, _ = game.reset(seed=0)
        >>> observations["player"].splitlines()[-1]
        'Actions: up, down, left, right.'
        >>> game.step({"player": "Up."}).infos["player"]
        {'valid': True, 'reason': None, 'action': 'up'}
    """

    Config = SnakeConfig
    AGENTS = ("player",)
    ENEMY: ClassVar[int] = 1

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> rules.Board:
        """Two length-1 snakes (player first) and the apples at random, or ``options["board"]``."""
        return _given_board(options, 2) or rules.spawn(rng, self.config.size, 2, self.config.num_apples)

    def transition(
        self, state: rules.Board, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[rules.Board, Mapping[AgentID, float]]:
        """The enemy draws a safe move, then both snakes move at once; the player's reward."""
        enemy_move = rules.random_safe_move(state, self.ENEMY, rng)
        state, fates = rules.step(state, {0: actions["player"], self.ENEMY: enemy_move}, rng)
        return state, {"player": rules.reward(fates[0], self.config.death_penalty)}

    def success(self, state: rules.Board, agent: AgentID) -> bool:
        """The player is alive at the end and ate at least one apple."""
        player = state.snakes[0]
        return player.alive and player.apples >= 1

    def key(self, state: rules.Board, agent: AgentID) -> Hashable:
        """Both snakes' cells (empty once dead) and the apples."""
        return tuple(s.body if s.alive else () for s in state.snakes), tuple(sorted(state.apples))

    def render(self, state: rules.Board, agent: AgentID) -> str:
        """Convention, apples, both snakes (head and body), the grid, the rules and the actions."""
        return self._render(state, 0, {self.ENEMY: "Enemy snake"}, "Your snake")


class SnakeArena(_SnakeGame):
    """2-4 snakes, every one an agent (``snake_0``...), moving simultaneously.

    Same apples, growth, deaths and rewards as :class:`Snake`. Dead snakes stop acting; the
    episode terminates when at most one snake is alive. A live snake without a valid move this
    round (absent from ``actions`` under ``on_invalid="penalize"``) keeps moving in its last
    direction, and ``on_invalid="default_action"`` plays that same move. Success: alive at the
    end with no live snake having eaten more apples.

    Example:
        >>> game = SnakeArena(num_snakes=3, max_steps=50)
        >>> _ = game.reset(seed=1)
        >>> game.active_agents
        ('snake_0', 'snake_1', 'snake_2')
    """

    Config = SnakeArenaConfig
    # The last snake alive (the most apples among those alive) wins; comparing returns would let a
    # snake that ate and died beat one that survived.
    outcome = "win_draw_loss_by_success"
    config: SnakeArenaConfig
    turn_based = False

    @property
    def agents(self) -> tuple[AgentID, ...]:
        """``snake_0`` ... ``snake_{n-1}``."""
        return tuple(f"snake_{i}" for i in range(self.config.num_snakes))

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> rules.Board:
        """``num_snakes`` length-1 snakes and the apples at random, or ``options["board"]``."""
        count = self.config.num_snakes
        return _given_board(options, count) or rules.spawn(rng, self.config.size, count, self.config.num_apples)

    def current_agents(self, state: rules.Board) -> tuple[AgentID, ...]:
        """Every live snake acts."""
        return tuple(agent for agent, snake in zip(self.agents, state.snakes, strict=True) if snake.alive)

    def transition(
        self, state: rules.Board, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[rules.Board, Mapping[AgentID, float]]:
        """All live snakes move at once (missing ones keep their direction); each one's reward."""
        moves = {self._index(agent): move for agent, move in actions.items()}
        state, fates = rules.step(state, moves, rng)
        penalty = self.config.death_penalty
        return state, {agent: rules.reward(fate, penalty) for agent, fate in zip(self.agents, fates, strict=True)}

    def default_move(self, state: rules.Board, agent: AgentID) -> int:
        """The snake's last direction (what it does without a valid answer)."""
        return state.snakes[self._index(agent)].direction

    def success(self, state: rules.Board, agent: AgentID) -> bool:
        """Alive at the end, and no live snake ate more apples."""
        mine = state.snakes[self._index(agent)]
        return mine.alive and all(not s.alive or s.apples <= mine.apples for s in state.snakes)

    def key(self, state: rules.Board, agent: AgentID) -> Hashable:
        """The agent, every snake's cells and direction (empty once dead), and the apples."""
        snakes = tuple((s.body, s.direction) if s.alive else () for s in state.snakes)
        return self._index(agent), snakes, tuple(sorted(state.apples))

    def render(self, state: rules.Board, agent: AgentID) -> str:
        """The board from ``agent``'s side: its head is 1, the others' heads 2, 3, 4 in agent order."""
        me = self._index(agent)
        names = {i: name for i, name in enumerate(self.agents) if i != me}
        direction = rules.MOVE_NAMES[state.snakes[me].direction]
        extra = f" Without a valid answer you keep moving {direction} (your last move)."
        return self._render(state, me, names, f"Your snake ({agent})", extra)


def _given_board(options: Mapping[str, Any], num_snakes: int) -> rules.Board | None:
    """The start board passed as ``options["board"]`` (checked), or None."""
    board = options.get("board")
    if board is None:
        return None
    if not isinstance(board, rules.Board) or len(board.snakes) != num_snakes:
        raise ValueError(f"options['board'] must be a snake_rules.Board with {num_snakes} snakes")
    return board


def _xy(position: rules.Position) -> str:
    return f"({position[0]}, {position[1]})"
