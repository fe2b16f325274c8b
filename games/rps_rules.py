"""Iterated rock-paper-scissors rules as pure functions, and a frequency-counter strategy.

A round is a pair ``(move of player 0, move of player 1)``; a move is 0 (rock), 1 (paper) or
2 (scissors), or None when that player gave no valid answer and so forfeits the round.
"""

from __future__ import annotations

from collections.abc import Sequence

ROCK, PAPER, SCISSORS = 0, 1, 2
MOVE_NAMES = ("rock", "paper", "scissors")
Round = tuple[int | None, int | None]


def beats(move: int, other: int) -> bool:
    """Whether ``move`` beats ``other`` (paper > rock, scissors > paper, rock > scissors)."""
    return (move - other) % 3 == 1


def outcome(first: int | None, second: int | None) -> int:
    """+1 if the first player wins the round, -1 if the second does, 0 for a tie.

    A missing move (None) loses to any move; two missing moves tie.

    Example:
        >>> outcome(PAPER, ROCK), outcome(ROCK, PAPER), outcome(SCISSORS, SCISSORS), outcome(None, ROCK)
        (1, -1, 0, -1)
    """
    if first is None or second is None:
        return (first is not None) - (second is not None)
    if first == second:
        return 0
    return 1 if beats(first, second) else -1


def scores(history: Sequence[Round]) -> tuple[int, int]:
    """Rounds won by each player so far."""
    results = [outcome(first, second) for first, second in history]
    return results.count(1), results.count(-1)


def counter_move(opponent_moves: Sequence[int | None]) -> int:
    """The move that beats the opponent's most frequent move so far.

    Ties between equally frequent moves go to the one played most recently; with no history
    the answer is paper. Deterministic, so it is exploitable on purpose: a baseline to beat.
    """
    played = [move for move in opponent_moves if move is not None]
    if not played:
        return PAPER
    counts = [played.count(move) for move in range(3)]
    top = max(counts)
    likely = next(move for move in reversed(played) if counts[move] == top)
    return (likely + 1) % 3
