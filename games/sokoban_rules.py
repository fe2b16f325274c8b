"""Sokoban rules as pure functions: levels, pushes, rewards, a reverse-play generator and a solver.

Cells are flat indices ``row * width + col`` with row 0 at the top, so a move is an index
offset; every level is enclosed by walls, so no move ever leaves the grid. The player walks
into free floor, or into a box when the cell behind that box is free floor (it pushes the box
one cell); a push into a wall or into a second box does nothing, as does walking into a wall.

Generated levels are solvable by construction: boxes start on the goals and the player walks
backwards at random, pulling boxes behind it; each pull is a push undone, so replaying the walk
backwards solves the level in at most as many moves as the walk took.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
MOVES = (UP, DOWN, LEFT, RIGHT)
MOVE_NAMES = ("up", "down", "left", "right")


@dataclass(frozen=True, slots=True)
class Level:
    """The fixed part of a level: size, walls (``walls[cell]`` is 1 for a wall), goals, a name."""

    width: int
    height: int
    walls: bytes
    goals: frozenset[int]
    name: str = "generated"

    def offset(self, move: int) -> int:
        """Index offset of ``move``."""
        return (-self.width, self.width, -1, 1)[move]


@dataclass(frozen=True, slots=True)
class SokobanState:
    """A level, the player's cell and the boxes' cells."""

    level: Level
    player: int
    boxes: frozenset[int]


def move(state: SokobanState, action: int) -> tuple[SokobanState, tuple[int, int] | None]:
    """Apply ``action``; returns the next state and the pushed box's (from, to) cells, if any."""
    level = state.level
    step = level.offset(action)
    ahead = state.player + step
    if level.walls[ahead]:
        return state, None
    if ahead not in state.boxes:
        return SokobanState(level, ahead, state.boxes), None
    beyond = ahead + step
    if level.walls[beyond] or beyond in state.boxes:
        return state, None
    return SokobanState(level, ahead, (state.boxes - {ahead}) | {beyond}), (ahead, beyond)


def push_reward(level: Level, push: tuple[int, int] | None) -> float:
    """+1 for a box pushed onto a goal, -1 for a box pushed off one, 0 otherwise."""
    if push is None:
        return 0.0
    return float((push[1] in level.goals) - (push[0] in level.goals))


def solved(state: SokobanState) -> bool:
    """Whether every box stands on a goal."""
    return state.boxes <= state.level.goals


def parse_level(rows: tuple[str, ...], name: str) -> SokobanState:
    """A state from XSB rows (``#`` wall, ``.`` goal, ``$`` box, ``*`` box on goal, ``@``/``+`` player).

    Floor the player cannot reach is turned into wall; a level open to the outside is refused.

    Raises:
        ValueError: no single player, boxes and goals in different numbers, or an open level.
    """
    width, height = max(map(len, rows)) + 2, len(rows) + 2  # a margin of wall all around
    padded = [" " * width, *(" " + row.ljust(width - 1) for row in rows), " " * width]
    text = "".join(padded)
    players = [i for i, ch in enumerate(text) if ch in "@+"]
    boxes = frozenset(i for i, ch in enumerate(text) if ch in "$*")
    goals = frozenset(i for i, ch in enumerate(text) if ch in ".*+")
    if len(players) != 1 or len(boxes) != len(goals) or not boxes:
        raise ValueError(f"level {name!r} needs one player and as many boxes as goals (at least one)")
    edge = {0, height - 1}
    solid = bytes(ch == "#" or i // width in edge or i % width in (0, width - 1) for i, ch in enumerate(text))
    reach = _reachable(Level(width, height, solid, goals), players[0], frozenset())
    if any(r in (1, height - 2) or c in (1, width - 2) for r, c in (divmod(i, width) for i in reach)):
        raise ValueError(f"level {name!r} is not enclosed by walls")  # the player reaches the text's edge
    rows_used = [i // width for i in reach]
    cols_used = [i % width for i in reach]
    top, left = min(rows_used) - 1, min(cols_used) - 1  # crop to the reachable floor and its walls
    new_width, new_height = max(cols_used) - left + 2, max(rows_used) - top + 2

    def crop(cell: int) -> int:
        return (cell // width - top) * new_width + cell % width - left

    walls = bytearray(b"\x01" * (new_width * new_height))
    for cell in reach:
        walls[crop(cell)] = 0
    level = Level(new_width, new_height, bytes(walls), frozenset(map(crop, goals)), name)
    return SokobanState(level, crop(players[0]), frozenset(map(crop, boxes)))


def _reachable(level: Level, start: int, boxes: frozenset[int]) -> set[int]:
    """Cells the player reaches from ``start`` without pushing a box."""
    seen = {start}
    stack = [start]
    offsets = (-level.width, level.width, -1, 1)
    while stack:
        cell = stack.pop()
        for step in offsets:
            nxt = cell + step
            if nxt not in seen and not level.walls[nxt] and nxt not in boxes:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def generate(
    rng: np.random.Generator, size: int, num_boxes: int, walk_steps: int, walks: int = 8, pull_p: float = 0.9
) -> SokobanState:
    """A random ``size`` x ``size`` level (outer wall included) solvable in <= ``walk_steps`` moves.

    A few interior walls are added where they keep the floor connected; boxes are put on the
    goals and the player on a free cell. Then ``walks`` times the player walks ``walk_steps``
    random steps backwards from there, pulling the box behind it with probability ``pull_p``;
    of the positions reached, the one whose optimal solution is longest is kept (a search that
    gives up after 2,000 states counts as ``walk_steps`` moves, the most possible, and ends the
    tries). A layout whose best position is solved in fewer than 3 moves is redrawn (up to 4
    times).
    """
    inner = [r * size + c for r in range(1, size - 1) for c in range(1, size - 1)]
    best: SokobanState | None = None
    best_moves = 0
    for _ in range(5):
        level, player = _layout(rng, size, inner, num_boxes)
        seen = set()
        for _ in range(walks):
            state = _reverse_walk(level, player, rng, walk_steps, pull_p)
            if (state.player, state.boxes) in seen or state.boxes <= level.goals:
                continue
            seen.add((state.player, state.boxes))
            solution = solve(state, max_states=2_000)
            moves = walk_steps if solution is None else len(solution)  # None: too long to search, not unsolvable
            if moves > best_moves:
                best, best_moves = state, moves
            if best_moves >= walk_steps:
                break  # no position can need more moves than the walk took
        if best is not None and best_moves >= 3:
            break
    if best is None:  # every walk came back solved: practically impossible beyond the tiniest boards
        return generate(rng, size, num_boxes, walk_steps, walks, pull_p)
    return best


def _layout(rng: np.random.Generator, size: int, inner: list[int], num_boxes: int) -> tuple[Level, int]:
    """Walls (the border and up to one interior wall per 8 cells), goals, and the player's cell."""
    walls = bytearray(b"\x01" * (size * size))
    for cell in inner:
        walls[cell] = 0
    for cell in rng.permutation(inner)[: int(rng.integers(0, len(inner) // 8 + 1))].tolist():
        walls[cell] = 1
        floor = [c for c in inner if not walls[c]]
        if len(_reachable(Level(size, size, bytes(walls), frozenset()), floor[0], frozenset())) < len(floor):
            walls[cell] = 0  # it would cut the floor in two
    floor = [c for c in inner if not walls[c]]
    picks = rng.choice(len(floor), size=num_boxes + 1, replace=False).tolist()
    goals = frozenset(floor[i] for i in picks[:num_boxes])
    return Level(size, size, bytes(walls), goals), floor[picks[-1]]


def _reverse_walk(level: Level, player: int, rng: np.random.Generator, steps: int, pull_p: float) -> SokobanState:
    """Walk backwards from the solved position, pulling boxes; every step is a push undone."""
    boxes = set(level.goals)
    walls = level.walls
    offsets = (-level.width, level.width, -1, 1)
    directions = rng.integers(0, 4, size=steps)
    pulls = rng.random(steps) < pull_p
    for direction, pull in zip(directions.tolist(), pulls.tolist(), strict=True):
        step = offsets[direction]
        ahead = player + step
        if walls[ahead] or ahead in boxes:
            continue
        behind = player - step
        if pull and behind in boxes:
            boxes.remove(behind)
            boxes.add(player)
        player = ahead
    return SokobanState(level, player, frozenset(boxes))


@lru_cache(maxsize=256)
def goal_distances(level: Level) -> tuple[int, ...]:
    """Per cell, the fewest pushes that could bring a box there to some goal (ignoring other boxes).

    Computed backwards from the goals by pulls: a box moves from ``cell`` to ``cell + step``
    only if the player can stand at ``cell - step``. Cells from which no goal can be reached
    (dead cells, walls) get a large number.
    """
    unreachable = len(level.walls)
    distances = [unreachable] * len(level.walls)
    offsets = [level.offset(m) for m in MOVES]
    queue = deque(level.goals)
    for goal in level.goals:
        distances[goal] = 0
    while queue:
        cell = queue.popleft()
        for step in offsets:
            source = cell - step  # the box came from here, pushed by a player standing at source - step
            if distances[source] == unreachable and not level.walls[source] and not level.walls[source - step]:
                distances[source] = distances[cell] + 1
                queue.append(source)
    return tuple(distances)


def solve(state: SokobanState, max_states: int = 200_000) -> list[int] | None:
    """A shortest solution (fewest moves), by A* search over (player, boxes).

    The heuristic (each box's fewest pushes to its nearest goal, summed) never overestimates and
    changes by at most one per move, so the first solution found is optimal. Boxes are never
    pushed where no goal can be reached. Returns the moves, or None if the level is unsolvable
    from ``state`` or more than ``max_states`` states would have to be searched.
    """
    if solved(state):
        return []
    level = state.level
    walls = level.walls
    distance = goal_distances(level)
    unreachable = len(walls)
    if any(distance[box] >= unreachable for box in state.boxes):
        return None
    goal_mask = sum(1 << cell for cell in level.goals)
    cells = len(walls)
    offsets = [level.offset(m) for m in MOVES]
    # A node is one int: box bit mask times the number of cells, plus the player's cell.
    start = sum(1 << cell for cell in state.boxes) * cells + state.player
    parents = {start: (-1, -1)}
    cost = {start: 0}
    start_h = sum(distance[box] for box in state.boxes)
    frontier = [(start_h, 0, start, start_h)]  # (f, -g, node, h): lowest f first, then the deepest
    while frontier:
        _, minus_g, node, h = heapq.heappop(frontier)
        g = -minus_g
        if cost[node] < g:
            continue  # a stale entry: the node was reached more cheaply since
        boxes, player = divmod(node, cells)
        for action, step in zip(MOVES, offsets, strict=True):
            ahead = player + step
            if walls[ahead]:
                continue
            child_h = h
            if boxes >> ahead & 1:
                beyond = ahead + step
                if walls[beyond] or boxes >> beyond & 1 or distance[beyond] >= unreachable:
                    continue
                moved = boxes ^ (1 << ahead) ^ (1 << beyond)
                child = moved * cells + ahead
                child_h += distance[beyond] - distance[ahead]
            else:
                moved = boxes
                child = node + step
            if cost.get(child, unreachable * unreachable) <= g + 1:
                continue
            cost[child] = g + 1
            parents[child] = (node, action)
            if moved & ~goal_mask == 0:
                return _path(parents, child)
            if len(cost) > max_states:
                return None
            heapq.heappush(frontier, (g + 1 + child_h, -g - 1, child, child_h))
    return None


def _path(parents: dict[int, tuple[int, int]], node: int) -> list[int]:
    path: list[int] = []
    while True:
        node, action = parents[node]
        if action < 0:
            return path[::-1]
        path.append(action)
