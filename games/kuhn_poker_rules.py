"""Kuhn poker rules as pure functions over (cards, betting history), and the Nash strategies.

Three cards, J < Q < K (0, 1, 2); each player antes 1 chip and is dealt one card. Player 0
acts first. With no bet pending a player may check or bet 1 chip; facing a bet, call or fold.
The betting history is a string of action letters (``k`` check, ``b`` bet, ``c`` call,
``f`` fold); the hand ends after ``kk``, ``bc``, ``bf``, ``kbc`` or ``kbf``.
"""

from __future__ import annotations

import numpy as np

JACK, QUEEN, KING = 0, 1, 2
CARD_NAMES = ("J", "Q", "K")
CHECK, BET, CALL, FOLD = 0, 1, 2, 3
ACTION_NAMES = ("check", "bet", "call", "fold")
ACTION_LETTERS = "kbcf"
TERMINAL_HISTORIES = frozenset({"kk", "bc", "bf", "kbc", "kbf"})
Cards = tuple[int, int]


def deal(rng: np.random.Generator) -> Cards:
    """Two different cards drawn from J, Q, K (player 0's first)."""
    first, second = rng.permutation(3)[:2]
    return int(first), int(second)


def is_terminal(history: str) -> bool:
    """Whether the hand has ended."""
    return history in TERMINAL_HISTORIES


def player_to_act(history: str) -> int | None:
    """0 or 1 while the hand lasts (players alternate, player 0 first), None once it ended."""
    return None if is_terminal(history) else len(history) % 2


def facing_bet(history: str) -> bool:
    """Whether the player to act faces a bet."""
    return history.endswith("b")


def legal_actions(history: str) -> tuple[int, ...]:
    """Call or fold facing a bet, check or bet otherwise; nothing once the hand ended."""
    if is_terminal(history):
        return ()
    return (CALL, FOLD) if facing_bet(history) else (CHECK, BET)


def play(history: str, action: int) -> str:
    """The history after ``action`` (which must be legal)."""
    if action not in legal_actions(history):
        raise ValueError(f"{ACTION_NAMES[action]} is not legal after {history!r}")
    return history + ACTION_LETTERS[action]


def contributions(history: str) -> tuple[int, int]:
    """Chips each player has put in the pot (ante included)."""
    chips = [1, 1]
    for index, letter in enumerate(history):
        if letter in "bc":
            chips[index % 2] += 1
    return chips[0], chips[1]


def payoffs(cards: Cards, history: str) -> tuple[int, int]:
    """Net chips won by each player in a finished hand (zero-sum).

    Example:
        >>> payoffs((KING, JACK), "kbc"), payoffs((JACK, QUEEN), "bf"), payoffs((QUEEN, KING), "kk")
        ((2, -2), (1, -1), (-1, 1))
    """
    if not is_terminal(history):
        raise ValueError(f"the hand is not over after {history!r}")
    chips = contributions(history)
    if history.endswith("f"):
        folder = (len(history) - 1) % 2
        winner = 1 - folder
    else:
        winner = 0 if cards[0] > cards[1] else 1
    won = chips[1 - winner]
    return (won, -won) if winner == 0 else (-won, won)


def nash_aggression(card: int, history: str, alpha: float) -> float:
    """Probability of the aggressive action (bet, or call) in the Nash family with parameter alpha.

    The known equilibria (Kuhn 1950), ``0 <= alpha <= 1/3``: player 0 bets J with probability
    alpha, never bets Q, bets K with 3 alpha; after check-bet it calls with Q with alpha + 1/3
    and always with K. Player 1 facing a bet calls with Q with 1/3 and always with K; after a
    check it bets J with 1/3 and always K. Every other case is passive (check or fold).
    """
    table = {
        "": (alpha, 0.0, 3 * alpha),
        "kb": (0.0, alpha + 1 / 3, 1.0),
        "b": (0.0, 1 / 3, 1.0),
        "k": (1 / 3, 0.0, 1.0),
    }
    return table[history][card]


def nash_action(card: int, history: str, alpha: float, uniform: float) -> int:
    """The Nash action given a uniform draw in [0, 1) (the caller owns the randomness)."""
    aggressive = uniform < nash_aggression(card, history, alpha)
    if facing_bet(history):
        return CALL if aggressive else FOLD
    return BET if aggressive else CHECK
