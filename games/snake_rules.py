"""Snake rules as pure functions: spawning, simultaneous moves, deaths, apples, and move heuristics.

Any number of snakes share a square board; every live snake moves one cell per round, all at
once. Coordinates are ``(x, y)``: x counts columns from the left, y counts rows from the bottom,
so ``(0, 0)`` is the bottom-left corner and ``up`` adds 1 to y (as in Frozen Lake and in
TextArena's Snake, from which the MS-GRPO authors' environment derives).

A round is resolved on the positions at its start:

* every live snake's head moves one cell (a snake given no move keeps its last direction);
* a head leaving the board dies (``"wall"``); two or more heads entering the same cell, or two
  heads swapping cells, all die (``"head-on"``); a head entering a cell held by any live snake
  dies (``"body"``), except a tail that leaves this round. A tail leaves unless its snake's head
  reaches an apple this round;
* a surviving snake whose head reaches an apple eats it and grows by one cell; each eaten apple
  respawns on a uniformly drawn free cell (no live snake, no apple), in snake order;
* dead snakes leave the board.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
MOVES = (UP, DOWN, LEFT, RIGHT)
MOVE_NAMES = ("up", "down", "left", "right")
DELTAS = ((0, 1), (0, -1), (-1, 0), (1, 0))  # (dx, dy) per move; y grows upward

Position = tuple[int, int]  # (x, y), (0, 0) bottom-left


@dataclass(frozen=True, slots=True)
class Snake:
    """One snake: its cells (head first), last direction, whether it lives, apples eaten."""

    body: tuple[Position, ...]
    direction: int
    alive: bool = True
    apples: int = 0

    @property
    def head(self) -> Position:
        """The head cell."""
        return self.body[0]


@dataclass(frozen=True, slots=True)
class Board:
    """The whole game state: board side, every snake (dead ones included), the apples."""

    size: int
    snakes: tuple[Snake, ...]
    apples: tuple[Position, ...]


@dataclass(frozen=True, slots=True)
class Fate:
    """What happened to one snake in a round: whether it ate, and how it died (None: it did not)."""

    ate: bool = False
    death: str | None = None


def target(position: Position, move: int) -> Position:
    """The cell ``move`` leads to from ``position`` (possibly off the board)."""
    dx, dy = DELTAS[move]
    return position[0] + dx, position[1] + dy


def inside(size: int, position: Position) -> bool:
    """Whether ``position`` lies on a ``size`` x ``size`` board."""
    return 0 <= position[0] < size and 0 <= position[1] < size


def alive_count(board: Board) -> int:
    """Number of live snakes."""
    return sum(snake.alive for snake in board.snakes)


def occupied(board: Board) -> set[Position]:
    """Cells held by live snakes."""
    return {cell for snake in board.snakes if snake.alive for cell in snake.body}


def spawn(rng: np.random.Generator, size: int, num_snakes: int, num_apples: int, min_gap: int = 3) -> Board:
    """A random start: length-1 snakes on distinct inner cells, then apples on free cells.

    Heads are kept at Manhattan distance >= ``min_gap`` from each other where the board allows
    (cells are tried in a random order; a cell too close is skipped, and used only if no
    farther one is left). Initial directions are random.
    """
    inner = [(x, y) for y in range(1, size - 1) for x in range(1, size - 1)] or [
        (x, y) for y in range(size) for x in range(size)
    ]
    order = [inner[i] for i in rng.permutation(len(inner))]
    heads: list[Position] = []
    for cell in order:
        if all(abs(cell[0] - h[0]) + abs(cell[1] - h[1]) >= min_gap for h in heads):
            heads.append(cell)
            if len(heads) == num_snakes:
                break
    for cell in order:  # fallback for crowded boards
        if len(heads) == num_snakes:
            break
        if cell not in heads:
            heads.append(cell)
    directions = rng.integers(0, 4, size=num_snakes)
    snakes = tuple(Snake(body=(head,), direction=d) for head, d in zip(heads, directions.tolist(), strict=True))
    taken = set(heads)
    free = [(x, y) for y in range(size) for x in range(size) if (x, y) not in taken]
    picks = rng.choice(len(free), size=min(num_apples, len(free)), replace=False)
    return Board(size=size, snakes=snakes, apples=tuple(free[int(i)] for i in picks))


def step(board: Board, moves: Mapping[int, int], rng: np.random.Generator) -> tuple[Board, tuple[Fate, ...]]:
    """Resolve one simultaneous round (see the module docstring for the exact rules).

    Args:
        board: The state at the start of the round.
        moves: Move per snake index; a live snake missing here keeps its last direction.
        rng: Draws the cells where eaten apples respawn.

    Returns:
        The next board and one :class:`Fate` per snake (already dead snakes get ``Fate()``).
    """
    snakes = board.snakes
    live = [i for i, snake in enumerate(snakes) if snake.alive]
    chosen = {i: moves.get(i, snakes[i].direction) for i in live}
    heads = {i: target(snakes[i].head, chosen[i]) for i in live}
    apples = set(board.apples)
    reaches_apple = {i: heads[i] in apples for i in live}
    blocked: set[Position] = set()
    for i in live:
        body = snakes[i].body
        blocked.update(body if reaches_apple[i] else body[:-1])
    crowd = Counter(heads.values())
    deaths: dict[int, str] = {}
    for i in live:
        if not inside(board.size, heads[i]):
            deaths[i] = "wall"
        elif crowd[heads[i]] > 1 or any(heads[j] == snakes[i].head and heads[i] == snakes[j].head for j in live):
            deaths[i] = "head-on"
        elif heads[i] in blocked:
            deaths[i] = "body"
    fates = [Fate() for _ in snakes]
    updated = list(snakes)
    eaten: list[Position] = []
    for i in live:
        snake = snakes[i]
        if i in deaths:
            updated[i] = replace(snake, alive=False)
            fates[i] = Fate(death=deaths[i])
        elif reaches_apple[i]:
            updated[i] = replace(snake, body=(heads[i], *snake.body), direction=chosen[i], apples=snake.apples + 1)
            fates[i] = Fate(ate=True)
            eaten.append(heads[i])
        else:
            updated[i] = replace(snake, body=(heads[i], *snake.body[:-1]), direction=chosen[i])
    next_board = Board(board.size, tuple(updated), board.apples)
    if eaten:
        next_board = _respawn(next_board, eaten, rng)
    return next_board, tuple(fates)


def _respawn(board: Board, eaten: list[Position], rng: np.random.Generator) -> Board:
    """Remove the eaten apples and place one new apple per eaten one on a uniformly drawn free cell."""
    apples = [apple for apple in board.apples if apple not in eaten]
    taken = occupied(board)
    for _ in eaten:
        taken.update(apples)
        free = [(x, y) for y in range(board.size) for x in range(board.size) if (x, y) not in taken]
        if free:
            apples.append(free[int(rng.integers(len(free)))])
    return replace(board, apples=tuple(apples))


def reward(fate: Fate, death_penalty: float) -> float:
    """+1 per apple eaten; -1 on death, minus ``death_penalty`` on top."""
    if fate.death is not None:
        return -1.0 - death_penalty
    return 1.0 if fate.ate else 0.0


def safe_moves(board: Board, index: int) -> tuple[int, ...]:
    """Moves of snake ``index`` that cannot kill it by a wall or a body this round.

    Every cell of another live snake counts as blocked (its tail stays if it eats); the snake's
    own tail does not (it always leaves: the head cannot reach an apple on it). A head-on
    collision depends on the others' moves and is not counted here (see :func:`head_on_risk`).
    """
    snake = board.snakes[index]
    blocked = set(snake.body[:-1])
    for j, other in enumerate(board.snakes):
        if j != index and other.alive:
            blocked.update(other.body)
    return tuple(m for m in MOVES if inside(board.size, t := target(snake.head, m)) and t not in blocked)


def head_on_risk(board: Board, index: int, move: int) -> bool:
    """Whether another live snake's head could enter the cell ``move`` leads to this round."""
    cell = target(board.snakes[index].head, move)
    return any(
        j != index and other.alive and abs(other.head[0] - cell[0]) + abs(other.head[1] - cell[1]) == 1
        for j, other in enumerate(board.snakes)
    )


def random_safe_move(board: Board, index: int, rng: np.random.Generator) -> int:
    """A uniformly drawn safe move of snake ``index``; any move when none is safe."""
    options = safe_moves(board, index) or MOVES
    return options[int(rng.integers(len(options)))]


def room(board: Board, index: int, move: int, limit: int) -> int:
    """Free cells reachable from where ``move`` takes snake ``index`` (flood fill, counted up to ``limit``).

    Cells of live snakes are obstacles, except this snake's own tail (it moves on).
    """
    snake = board.snakes[index]
    start = target(snake.head, move)
    blocked = occupied(board) - {snake.body[-1]}
    seen = {start}
    stack = [start]
    while stack and len(seen) < limit:
        cell = stack.pop()
        for nxt in (target(cell, m) for m in MOVES):
            if nxt not in seen and nxt not in blocked and inside(board.size, nxt):
                seen.add(nxt)
                stack.append(nxt)
    return len(seen)


def greedy_move(board: Board, index: int) -> int:
    """The baseline heuristic: a safe move toward the nearest apple.

    Moves are ranked by: safe first (:func:`safe_moves`), then not into a pocket smaller than
    the snake (:func:`room`), then no head-on risk, then the Manhattan distance from the new
    head to the nearest apple; remaining ties go to the first move in ``up, down, left, right``
    order.
    """
    snake = board.snakes[index]
    safe = set(safe_moves(board, index))
    need = len(snake.body) + 1

    def rank(move: int) -> tuple[bool, bool, bool, int, int]:
        cell = target(snake.head, move)
        distance = min((abs(cell[0] - a[0]) + abs(cell[1] - a[1]) for a in board.apples), default=0)
        cramped = move in safe and room(board, index, move, need) < need
        return move not in safe, cramped, head_on_risk(board, index, move), distance, move

    return min(MOVES, key=rank)
