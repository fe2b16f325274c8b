"""Minesweeper rules as pure functions, and a simple logical solver.

Cells are indexed ``y * width + x`` (x = column from the left, y = row from the top). Mines are
placed when the first cell is revealed, from a random order of the cells drawn at the start:
the first ``mines`` cells of that order that are neither the first cell nor (when the board
leaves room) its neighbours. So the first reveal always opens an area, and the layout depends
only on the seed and the first cell. Revealing a cell with no adjacent mine also reveals its
neighbours, recursively (flood fill).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=4096)
def neighbours(index: int, width: int, height: int) -> tuple[int, ...]:
    """The up to 8 cells around ``index``."""
    x, y = index % width, index // width
    return tuple(
        (y + dy) * width + x + dx
        for dy in (-1, 0, 1)
        for dx in (-1, 0, 1)
        if (dx or dy) and 0 <= x + dx < width and 0 <= y + dy < height
    )


def random_order(rng: np.random.Generator, width: int, height: int) -> tuple[int, ...]:
    """A random order of all cells (mines are taken from its front)."""
    return tuple(int(i) for i in rng.permutation(width * height))


def place_mines(order: Sequence[int], count: int, first: int, width: int, height: int) -> frozenset[int]:
    """The first ``count`` cells of ``order`` outside the first cell (and its neighbours if room)."""
    excluded = {first, *neighbours(first, width, height)}
    if width * height - len(excluded) < count:
        excluded = {first}
    return frozenset([cell for cell in order if cell not in excluded][:count])


def adjacent_mines(mines: frozenset[int], index: int, width: int, height: int) -> int:
    """How many mines touch ``index``."""
    return sum(cell in mines for cell in neighbours(index, width, height))


def reveal(revealed: frozenset[int], mines: frozenset[int], index: int, width: int, height: int) -> frozenset[int]:
    """The revealed set after revealing ``index``, flood-filling from cells with no adjacent mine.

    Example:
        >>> sorted(reveal(frozenset(), frozenset({8}), 0, 3, 3))  # one mine in the corner of 3x3
        [0, 1, 2, 3, 4, 5, 6, 7]
    """
    opened = set(revealed)
    queue = deque([index])
    while queue:
        cell = queue.popleft()
        if cell in opened:
            continue
        opened.add(cell)
        if cell not in mines and adjacent_mines(mines, cell, width, height) == 0:
            queue.extend(n for n in neighbours(cell, width, height) if n not in opened)
    return frozenset(opened)


def solver_move(width: int, height: int, mine_count: int, numbers: dict[int, int]) -> int:
    """A cell to reveal from what a player sees: the revealed cells and their numbers.

    Deduces safe cells and mines from single constraints (a number whose unknown neighbours are
    all mines, or all safe) and from pairs of constraints where one's cells contain the other's;
    reveals the lowest safe cell found. Otherwise guesses the cell least likely to hold a mine
    (the highest density of remaining mines among the constraints on it; elsewhere the average
    density of the mines not yet located). With nothing revealed yet it opens the centre.
    """
    cells = width * height
    if not numbers:
        return (height // 2) * width + width // 2
    unknown = [cell for cell in range(cells) if cell not in numbers]
    mines: set[int] = set()
    safe: set[int] = set()
    changed = True
    while changed:
        changed = False
        constraints = _constraints(numbers, mines, safe, width, height)
        for group, remaining in constraints:
            if remaining == 0:
                found, into = group, safe
            elif remaining == len(group):
                found, into = group, mines
            else:
                continue
            if not found <= into:
                into.update(found)
                changed = True
        if not changed:
            for small, small_left in constraints:
                for large, large_left in constraints:
                    if small < large:
                        rest, left = large - small, large_left - small_left
                        target = safe if left == 0 else mines if left == len(rest) else None
                        if target is not None and not rest <= target:
                            target.update(rest)
                            changed = True
    if safe:
        return min(safe)
    return _least_risky(unknown, mines, mine_count, _constraints(numbers, mines, safe, width, height))


def _constraints(
    numbers: dict[int, int], mines: set[int], safe: set[int], width: int, height: int
) -> list[tuple[frozenset[int], int]]:
    """(undecided hidden neighbours, mines among them) for every revealed number."""
    result = []
    for cell, number in numbers.items():
        hidden = [n for n in neighbours(cell, width, height) if n not in numbers]
        group = frozenset(n for n in hidden if n not in mines and n not in safe)
        if group:
            result.append((group, number - sum(n in mines for n in hidden)))
    return result


def _least_risky(
    unknown: Iterable[int], mines: set[int], mine_count: int, constraints: list[tuple[frozenset[int], int]]
) -> int:
    hidden = list(unknown)
    undecided = [cell for cell in hidden if cell not in mines]
    if not undecided:  # only mines are left hidden: the grid is already cleared
        return min(hidden, default=0)
    risk = dict.fromkeys(undecided, -1.0)
    for group, remaining in constraints:
        density = remaining / len(group)
        for cell in group:
            risk[cell] = max(risk[cell], density)
    density = (mine_count - len(mines)) / max(len(undecided), 1)
    for cell in undecided:
        if risk[cell] < 0:
            risk[cell] = density
    return min(undecided, key=lambda cell: (risk[cell], cell))
