"""2048 rules as pure functions over a 4x4 board, and a cheap expectimax player.

The board is a tuple of 16 tile values, row by row from the top-left, 0 for an empty cell. A
move slides every tile as far as it goes in one direction; two equal tiles that meet merge
into one of twice the value (each tile merges at most once per move) and the merged value is
added to the score. After a move that changes the board a new tile appears on a random empty
cell: 2 with probability 0.9, 4 with probability 0.1.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import pairwise

import numpy as np

SIZE = 4
UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
MOVE_NAMES = ("up", "down", "left", "right")
Board = tuple[int, ...]
Line = tuple[int, ...]

# Cell indices of each line, listed in the direction the tiles slide towards first.
_ROWS = tuple(tuple(SIZE * r + c for c in range(SIZE)) for r in range(SIZE))
_COLS = tuple(tuple(SIZE * r + c for r in range(SIZE)) for c in range(SIZE))
_LINES = (
    _COLS,  # up: towards row 0
    tuple(line[::-1] for line in _COLS),  # down
    _ROWS,  # left: towards column 0
    tuple(line[::-1] for line in _ROWS),  # right
)


@lru_cache(maxsize=65536)
def slide_line(line: Line) -> tuple[Line, int]:
    """Slide a line towards its start, merging equal neighbours once; the merged points.

    Example:
        >>> slide_line((2, 2, 2, 2)), slide_line((4, 4, 8, 0)), slide_line((0, 2, 0, 2))
        (((4, 4, 0, 0), 8), ((8, 8, 0, 0), 8), ((4, 0, 0, 0), 4))
    """
    tiles = [value for value in line if value]
    merged: list[int] = []
    points = 0
    index = 0
    while index < len(tiles):
        if index + 1 < len(tiles) and tiles[index] == tiles[index + 1]:
            merged.append(2 * tiles[index])
            points += 2 * tiles[index]
            index += 2
        else:
            merged.append(tiles[index])
            index += 1
    return tuple(merged + [0] * (len(line) - len(merged))), points


def move(board: Board, direction: int) -> tuple[Board, int]:
    """The board after sliding in ``direction`` (before any new tile) and the points scored."""
    cells = list(board)
    points = 0
    for indices in _LINES[direction]:
        line, gained = slide_line(tuple(board[i] for i in indices))
        points += gained
        for i, value in zip(indices, line, strict=True):
            cells[i] = value
    return tuple(cells), points


def changes(board: Board, direction: int) -> bool:
    """Whether sliding in ``direction`` changes the board."""
    return move(board, direction)[0] != board


def can_move(board: Board) -> bool:
    """Whether some move changes the board (the game is over when none does)."""
    return any(changes(board, direction) for direction in range(4))


def spawn(board: Board, rng: np.random.Generator) -> Board:
    """Put a 2 (p=0.9) or a 4 (p=0.1) on a uniformly chosen empty cell."""
    empty = [i for i, value in enumerate(board) if value == 0]
    if not empty:
        return board
    cell = empty[int(rng.integers(len(empty)))]
    value = 2 if rng.random() < 0.9 else 4
    return board[:cell] + (value,) + board[cell + 1 :]


def new_board(rng: np.random.Generator) -> Board:
    """An empty board with two random tiles, as the game starts."""
    return spawn(spawn((0,) * (SIZE * SIZE), rng), rng)


def max_tile(board: Board) -> int:
    """The largest tile on the board."""
    return max(board)


@lru_cache(maxsize=65536)
def _line_score(line: Line) -> float:
    """Monotonicity, smoothness and merge chances of one line, on log2 tile values."""
    logs = [value.bit_length() - 1 if value else 0 for value in line]
    rising = falling = 0
    for a, b in pairwise(logs):
        if a > b:
            falling += a - b
        else:
            rising += b - a
    tiles = [value for value in logs if value]
    rough = sum(abs(a - b) for a, b in pairwise(tiles))
    merges = sum(a == b for a, b in pairwise(tiles))
    return -float(min(rising, falling)) - 0.1 * rough + merges


def heuristic(board: Board) -> float:
    """Position value: empty cells, monotone and smooth rows and columns, the top tile in a corner."""
    score = 2.7 * board.count(0)
    for lines in (_ROWS, _COLS):
        for indices in lines:
            score += _line_score(tuple(board[i] for i in indices))
    top = max(board)
    if board.index(top) in (0, SIZE - 1, SIZE * (SIZE - 1), SIZE * SIZE - 1):
        score += 0.5 * (top.bit_length() - 1)
    return score


def best_move(board: Board) -> int:
    """One-ply expectimax: the move maximising the expected heuristic after the random spawn.

    Only moves that change the board are considered (UP when none does). The expectation runs
    over every empty cell and both spawn values, so one call costs at most ~120 heuristic
    evaluations (about a millisecond).
    """
    best_direction, best_value = UP, float("-inf")
    for direction in range(4):
        after, _ = move(board, direction)
        if after == board:
            continue
        empty = [i for i, value in enumerate(after) if value == 0]
        expected = 0.0
        for cell in empty:
            for value, probability in ((2, 0.9), (4, 0.1)):
                expected += probability * heuristic(after[:cell] + (value,) + after[cell + 1 :])
        total = expected / max(len(empty), 1)
        if total > best_value:
            best_direction, best_value = direction, total
    return best_direction
