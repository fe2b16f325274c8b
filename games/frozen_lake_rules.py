"""Frozen Lake rules as pure functions: maps, moves, slipping, and the optimal policy.

Same rules as Gymnasium's ``FrozenLake-v1``: the agent starts at ``S`` (top-left), must reach
``G`` (bottom-right) without stepping into a hole ``H``; moves off the board leave it in place;
on slippery ice the intended move happens with probability 1/3 and each perpendicular move with
1/3. Maps are rows of characters, top row first, as in Gymnasium.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

import numpy as np

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
MOVE_NAMES = ("left", "down", "right", "up")
_DELTAS = ((0, -1), (1, 0), (0, 1), (-1, 0))  # (row, col) per move

STANDARD_4X4 = ("SFFF", "FHFH", "FFFH", "HFFG")
STANDARD_8X8 = (
    "SFFFFFFF",
    "FFFFFFFF",
    "FFFHFFFF",
    "FFFFFHFF",
    "FFFHFFFF",
    "FHHFFFHF",
    "FHFFHFHF",
    "FFFHFFFG",
)

Map = tuple[str, ...]
Position = tuple[int, int]  # (row, col), row 0 at the top


def has_path(desc: Map) -> bool:
    """Whether some path over frozen tiles leads from S to G."""
    return shortest_path_length(desc) is not None


def shortest_path_length(desc: Map, start: Position = (0, 0)) -> int | None:
    """Fewest moves from ``start`` to the goal without entering a hole (None if impossible)."""
    distances = _distances_to_goal(desc)
    return distances.get(start)


@lru_cache(maxsize=4096)
def _distances_to_goal(desc: Map) -> dict[Position, int]:
    """Breadth-first distances from every safe tile to the goal (tiles that cannot reach it absent)."""
    size = len(desc)
    goal = next((r, c) for r in range(size) for c in range(size) if desc[r][c] == "G")
    distances = {goal: 0}
    queue = deque([goal])
    while queue:
        row, col = queue.popleft()
        for d_row, d_col in _DELTAS:
            r, c = row + d_row, col + d_col
            if 0 <= r < size and 0 <= c < size and (r, c) not in distances and desc[r][c] != "H":
                distances[(r, c)] = distances[(row, col)] + 1
                queue.append((r, c))
    return distances


def potential(desc: Map, position: Position) -> float:
    """Phi of potential-based shaping: minus the shortest-path distance to the goal, 0 in a terminal tile.

    A hole and the goal end the episode, and an absorbing state's potential must be 0 for the shaped
    optimal policy to be the original one (Ng, Harada & Russell 1999); a tile cut off from the goal
    is farther than any path (minus the number of tiles).
    """
    if tile(desc, position) in "HG":
        return 0.0
    distance = _distances_to_goal(desc).get(position)
    return -float(len(desc) ** 2 if distance is None else distance)


def generate_random_map(rng: np.random.Generator, size: int = 4, p_frozen: float = 0.8) -> Map:
    """A random map with a path from S to G, drawn as Gymnasium's ``generate_random_map`` does.

    Tiles are frozen with probability ``p_frozen``; S is the top-left and G the bottom-right
    corner; maps without a path are redrawn. Only ``rng`` is used.
    """
    while True:
        tiles = rng.choice(np.array(["F", "H"]), size=(size, size), p=[p_frozen, 1.0 - p_frozen])
        tiles[0][0] = "S"
        tiles[-1][-1] = "G"
        desc = tuple("".join(row) for row in tiles)
        if has_path(desc):
            return desc


def move(desc: Map, position: Position, action: int) -> Position:
    """Where ``action`` leads from ``position`` (walls keep the agent in place)."""
    size = len(desc)
    d_row, d_col = _DELTAS[action]
    row = min(max(position[0] + d_row, 0), size - 1)
    col = min(max(position[1] + d_col, 0), size - 1)
    return row, col


def slip(action: int, rng: np.random.Generator) -> int:
    """The move that actually happens on slippery ice: intended or perpendicular, 1/3 each."""
    return (action + int(rng.integers(-1, 2))) % 4


def tile(desc: Map, position: Position) -> str:
    """The tile letter at ``position``."""
    return desc[position[0]][position[1]]


def optimal_action(desc: Map, position: Position, steps_left: int | None, slippery: bool) -> int:
    """An action maximising the probability of reaching the goal in the steps left.

    Without slipping this follows a shortest path. With slipping it runs finite-horizon value
    iteration over (tile, steps left), which is exact for the step-limited game.
    """
    if not slippery:
        distances = _distances_to_goal(desc)
        best = min(range(4), key=lambda a: distances.get(move(desc, position, a), 10**9))
        return best
    horizon = steps_left if steps_left is not None else 4 * len(desc) ** 2
    values = _slippery_values(desc, max(horizon - 1, 0))
    return max(range(4), key=lambda a: _action_value(desc, position, a, values))


def _action_value(desc: Map, position: Position, action: int, next_values: dict[Position, float]) -> float:
    total = 0.0
    for actual in ((action - 1) % 4, action, (action + 1) % 4):
        total += next_values[move(desc, position, actual)] / 3.0
    return total


@lru_cache(maxsize=1024)
def _slippery_values(desc: Map, steps_left: int) -> dict[Position, float]:
    """Probability of reaching the goal from each tile with ``steps_left`` moves to go."""
    size = len(desc)
    positions = [(r, c) for r in range(size) for c in range(size)]
    values = {p: 1.0 if tile(desc, p) == "G" else 0.0 for p in positions}
    for _ in range(steps_left):
        updated = {}
        for p in positions:
            if tile(desc, p) in "GH":
                updated[p] = values[p]
            else:
                updated[p] = max(_action_value(desc, p, a, values) for a in range(4))
        values = updated
    return values


def success_probability(desc: Map, position: Position, steps_left: int, slippery: bool) -> float:
    """Probability that optimal play reaches the goal from ``position`` within ``steps_left``."""
    if not slippery:
        distance = _distances_to_goal(desc).get(position)
        return 1.0 if distance is not None and distance <= steps_left else 0.0
    return _slippery_values(desc, steps_left)[position]
