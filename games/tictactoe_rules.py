"""Tic-tac-toe rules as pure functions over a 9-cell board, and a perfect minimax player.

The board is a tuple of 9 marks, row by row from the top-left (index 0) to the bottom-right
(index 8); ``X`` moves first, so whose turn it is follows from the counts of marks.
"""

from __future__ import annotations

from functools import cache

EMPTY, CROSS, NOUGHT = 0, 1, 2
MARK_NAMES = (".", "X", "O")
Board = tuple[int, ...]

EMPTY_BOARD: Board = (EMPTY,) * 9
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def winner(board: Board) -> int:
    """The mark (CROSS for X, NOUGHT for O) with three in a line, or EMPTY if nobody has one.

    Example:
        >>> winner((CROSS, CROSS, CROSS, NOUGHT, NOUGHT, EMPTY, EMPTY, EMPTY, EMPTY)) == CROSS
        True
    """
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return EMPTY


def is_full(board: Board) -> bool:
    """Whether every cell is taken."""
    return EMPTY not in board


def is_over(board: Board) -> bool:
    """Whether the game has ended (a line of three, or a full board)."""
    return winner(board) != EMPTY or is_full(board)


def mark_to_move(board: Board) -> int:
    """CROSS (X) when both have played as often (X starts), else NOUGHT (O)."""
    return CROSS if board.count(CROSS) == board.count(NOUGHT) else NOUGHT


def legal_cells(board: Board) -> tuple[int, ...]:
    """Indices of the empty cells (none once the game is over)."""
    if winner(board) != EMPTY:
        return ()
    return tuple(index for index, mark in enumerate(board) if mark == EMPTY)


def completing_cells(board: Board, mark: int) -> frozenset[int]:
    """The empty cells where ``mark`` would complete a line of three (where the other mark must block).

    Example:
        >>> sorted(completing_cells((CROSS, CROSS, EMPTY, NOUGHT, NOUGHT, EMPTY, EMPTY, EMPTY, EMPTY), NOUGHT))
        [5]
    """
    return frozenset(
        cell
        for line in LINES
        if sum(board[index] == mark for index in line) == 2
        for cell in line
        if board[cell] == EMPTY
    )


def play(board: Board, cell: int, mark: int) -> Board:
    """The board after ``mark`` is put on the empty ``cell``."""
    if board[cell] != EMPTY:
        raise ValueError(f"cell {cell} is taken")
    return board[:cell] + (mark,) + board[cell + 1 :]


@cache
def value(board: Board) -> int:
    """Game value for the player to move under perfect play (negamax).

    A win scores ``1 + empty cells left`` (so faster wins score higher), a loss the negative,
    a draw 0. Memoised: tic-tac-toe has 5,478 reachable positions.
    """
    if winner(board) != EMPTY:  # the previous player just completed a line
        return -(1 + board.count(EMPTY))
    if is_full(board):
        return 0
    mark = mark_to_move(board)
    return max(-value(play(board, cell, mark)) for cell in legal_cells(board))


def best_move(board: Board) -> int:
    """A perfect move for the player to move (the lowest cell among equally good ones)."""
    mark = mark_to_move(board)
    return max(legal_cells(board), key=lambda cell: (-value(play(board, cell, mark)), -cell))
