"""Connect Four rules as pure functions over 7 columns of 6 cells, and an alpha-beta player.

The board is a tuple of 7 columns, each the tuple of marks from the bottom up, so a move simply
appends to a column. ``X`` moves first. The search works on bitboards (one Python int per
player, 7 bits per column with a spare top bit so that line tests never wrap), which keeps a
depth-5 alpha-beta search at a few milliseconds to a few tens of milliseconds.
"""

from __future__ import annotations

from functools import lru_cache

ROWS, COLS = 6, 7
EMPTY, CROSS, NOUGHT = 0, 1, 2
MARK_NAMES = (".", "X", "O")
Columns = tuple[tuple[int, ...], ...]

EMPTY_BOARD: Columns = ((),) * COLS
CENTER_FIRST = (3, 2, 4, 1, 5, 0, 6)
WIN_SCORE = 100_000
_SHIFTS = (1, ROWS + 1, ROWS, ROWS + 2)  # vertical, horizontal, two diagonals


def drop(columns: Columns, col: int, mark: int) -> Columns:
    """The board after ``mark`` drops into column ``col`` (which must not be full)."""
    if len(columns[col]) >= ROWS:
        raise ValueError(f"column {col} is full")
    return columns[:col] + (columns[col] + (mark,),) + columns[col + 1 :]


def cell(columns: Columns, row: int, col: int) -> int:
    """The mark at ``row`` (0 = bottom) of ``col``, or EMPTY."""
    stack = columns[col]
    return stack[row] if row < len(stack) else EMPTY


def mark_to_move(columns: Columns) -> int:
    """CROSS (X) after an even number of moves (X starts), else NOUGHT (O)."""
    return CROSS if sum(len(stack) for stack in columns) % 2 == 0 else NOUGHT


def bitboard(columns: Columns, mark: int) -> int:
    """The cells of ``mark`` as bits ``col * 7 + row``."""
    bits = 0
    for col, stack in enumerate(columns):
        for row, owner in enumerate(stack):
            if owner == mark:
                bits |= 1 << (col * (ROWS + 1) + row)
    return bits


def has_four(bits: int) -> bool:
    """Whether the bitboard holds four in a line."""
    for shift in _SHIFTS:
        pairs = bits & (bits >> shift)
        if pairs & (pairs >> (2 * shift)):
            return True
    return False


def winner(columns: Columns) -> int:
    """CROSS or NOUGHT if that mark has four in a line, else EMPTY."""
    for mark in (CROSS, NOUGHT):
        if has_four(bitboard(columns, mark)):
            return mark
    return EMPTY


def is_full(columns: Columns) -> bool:
    """Whether all 42 cells are taken."""
    return all(len(stack) == ROWS for stack in columns)


def is_over(columns: Columns) -> bool:
    """Four in a line, or a full board."""
    return winner(columns) != EMPTY or is_full(columns)


def legal_columns(columns: Columns) -> tuple[int, ...]:
    """Columns with room left (none once the game is over)."""
    if winner(columns) != EMPTY:
        return ()
    return tuple(col for col, stack in enumerate(columns) if len(stack) < ROWS)


@lru_cache(maxsize=1)
def _windows() -> tuple[int, ...]:
    """The 69 four-cell lines of the board as bitmasks."""
    masks = []
    for col in range(COLS):
        for row in range(ROWS):
            for d_col, d_row in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(col + k * d_col, row + k * d_row) for k in range(4)]
                if all(0 <= c < COLS and 0 <= r < ROWS for c, r in cells):
                    masks.append(sum(1 << (c * (ROWS + 1) + r) for c, r in cells))
    return tuple(masks)


_CENTER_MASK = sum(1 << (3 * (ROWS + 1) + row) for row in range(ROWS))
_WINDOW_POINTS = (0, 1, 4, 16)


def evaluate(mine: int, theirs: int) -> int:
    """Heuristic value for ``mine``: open lines weighted by how full they are, plus the centre."""
    score = 3 * ((mine & _CENTER_MASK).bit_count() - (theirs & _CENTER_MASK).bit_count())
    for window in _windows():
        own = mine & window
        other = theirs & window
        if not other:
            score += _WINDOW_POINTS[own.bit_count()] if own else 0
        elif not own:
            score -= _WINDOW_POINTS[other.bit_count()]
    return score


def _negamax(mine: int, theirs: int, heights: list[int], depth: int, alpha: int, beta: int) -> int:
    """Alpha-beta negamax; ``mine`` is the side to move. Wins found earlier score higher."""
    moves = [col for col in CENTER_FIRST if heights[col] < ROWS]
    if not moves:
        return 0
    for col in moves:  # an immediate win ends the search at once
        if has_four(mine | 1 << (col * (ROWS + 1) + heights[col])):
            return WIN_SCORE + depth
    if depth == 0:
        return evaluate(mine, theirs)
    best = -WIN_SCORE * 2
    for col in moves:
        bit = 1 << (col * (ROWS + 1) + heights[col])
        heights[col] += 1
        score = -_negamax(theirs, mine | bit, heights, depth - 1, -beta, -alpha)
        heights[col] -= 1
        if score > best:
            best = score
        if best > alpha:
            alpha = best
        if alpha >= beta:
            break
    return best


def best_move(columns: Columns, depth: int = 5) -> int:
    """The column a depth-limited alpha-beta search prefers for the player to move.

    Ties go to the column nearest the centre, so the choice is deterministic.
    """
    mark = mark_to_move(columns)
    mine, theirs = bitboard(columns, mark), bitboard(columns, 3 - mark)
    heights = [len(stack) for stack in columns]
    moves = [col for col in CENTER_FIRST if heights[col] < ROWS]
    best_col, alpha = moves[0], -WIN_SCORE * 2
    for col in moves:
        bit = 1 << (col * (ROWS + 1) + heights[col])
        if has_four(mine | bit):
            return col
        heights[col] += 1
        score = -_negamax(theirs, mine | bit, heights, depth - 1, -WIN_SCORE * 2, -alpha)
        heights[col] -= 1
        if score > alpha:
            best_col, alpha = col, score
    return best_col
