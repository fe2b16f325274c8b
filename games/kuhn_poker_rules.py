"""Kuhn poker rules as pure functions over (cards, betting history), and the Nash strategies.

Three cards, J < Q < K (0, 1, 2); each player antes 1 chip and is dealt one card. Player 0
acts first. With no bet pending a player may check or bet 1 chip; facing a bet, call or fold.
The betting history is a string of action letters (``k`` check, ``b`` bet, ``c`` call,
``f`` fold); the hand ends after ``kk``, ``bc``, ``bf``, ``kbc`` or ``kbf``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


# --------------------------------------------------------------------------- exploitability
#: The histories at which a player acts: player 0 at "" and "kb", player 1 at "k" and "b".
DECISION_HISTORIES = ("", "k", "b", "kb")
#: An information set: the acting player's own card and the betting history.
InfoSet = tuple[int, str]
#: A behaviour strategy for both seats: per information set, the probability of each action of
#: ``legal_actions(history)``, in that order (the information sets say which seat acts).
Strategy = Mapping[InfoSet, Sequence[float]]


def information_sets() -> list[InfoSet]:
    """The 12 information sets of Kuhn poker, (card, history), player 0's and player 1's alike.

    Example:
        >>> len(information_sets()), information_sets()[:2]
        (12, [(0, ''), (0, 'k')])
    """
    return [(card, history) for card in (JACK, QUEEN, KING) for history in DECISION_HISTORIES]


def nash_strategy(alpha: float = 1 / 6) -> dict[InfoSet, tuple[float, float]]:
    """The equilibrium of :func:`nash_aggression` as a behaviour strategy (actions in ``legal_actions`` order)."""
    strategy = {}
    for card, history in information_sets():
        aggressive = nash_aggression(card, history, alpha)
        passive = 1.0 - aggressive
        strategy[(card, history)] = (aggressive, passive) if facing_bet(history) else (passive, aggressive)
    return strategy


def _checked(strategy: Strategy) -> dict[InfoSet, tuple[float, ...]]:
    checked: dict[InfoSet, tuple[float, ...]] = {}
    for infoset in information_sets():
        if infoset not in strategy:
            card, history = infoset
            raise ValueError(f"the strategy has no probabilities for card {CARD_NAMES[card]} after {history!r}")
        probabilities = tuple(float(p) for p in strategy[infoset])
        if len(probabilities) != 2 or min(probabilities) < 0 or abs(sum(probabilities) - 1.0) > 1e-6:
            raise ValueError(
                f"the probabilities at {infoset} must be two non-negative numbers adding to 1, got {probabilities}"
            )
        checked[infoset] = probabilities
    return checked


def best_response_value(strategy: Strategy, responder: int) -> float:
    """The expected net chips per hand of seat ``responder``'s best response to the other seat's ``strategy``.

    Exact, by backward induction over the responder's information sets: at each of them the
    responder picks the action with the highest value summed over the cards the other seat may
    hold, each weighted by its chance and by the other seat's probability of having reached
    there. (Perfect recall makes that choice per information set the best overall.)

    Example:
        >>> round(best_response_value(nash_strategy(), 0), 6), round(best_response_value(nash_strategy(), 1), 6)
        (-0.055556, 0.055556)
    """
    probabilities = _checked(strategy)

    def value(history: str, card: int, reach: dict[int, float]) -> float:
        if is_terminal(history):
            total = 0.0
            for other, weight in reach.items():
                cards = (card, other) if responder == 0 else (other, card)
                total += weight * payoffs(cards, history)[responder]
            return total
        actions = legal_actions(history)
        if player_to_act(history) == responder:
            return max(value(play(history, action), card, reach) for action in actions)
        return sum(
            value(
                play(history, action),
                card,
                {other: weight * probabilities[(other, history)][index] for other, weight in reach.items()},
            )
            for index, action in enumerate(actions)
        )

    cards = (JACK, QUEEN, KING)
    return sum(value("", card, {other: 1 / 6 for other in cards if other != card}) for card in cards)


def exploitability(strategy: Strategy) -> float:
    """How much a best response gains against ``strategy``, per hand and seat: (BR_0 + BR_1) / 2.

    This is OpenSpiel's exploitability (NashConv / 2): in a zero-sum game the two seats' values
    under any strategy add to 0, so the sum of the best responses' values is what both seats
    could gain by deviating. It is 0 exactly at a Nash equilibrium and at most 2 chips (what a
    hand can win at most), and it does not depend on which seat the strategy's owner sits in.

    Example:
        >>> round(exploitability(nash_strategy(0.0)), 12), round(exploitability(nash_strategy(1 / 3)), 12)
        (0.0, 0.0)
        >>> round(exploitability({infoset: (0.5, 0.5) for infoset in information_sets()}), 6)  # uniform random
        0.458333
    """
    return (best_response_value(strategy, 0) + best_response_value(strategy, 1)) / 2


def average_strategy(strategies: Sequence[Strategy]) -> dict[InfoSet, tuple[float, float]]:
    """The behaviour strategy of drawing one of ``strategies`` uniformly before each hand and playing it throughout.

    At an information set each strategy's move probabilities count in proportion to how likely
    that strategy is to reach it by its own earlier moves (Kuhn's theorem; the other seat's moves
    and the deal weigh every strategy alike). This is the *average policy* whose exploitability
    fictitious play and regret minimisation drive to 0 in a two-player zero-sum game, while the
    last policy of self-play may circle around the equilibrium. Where no strategy reaches an
    information set, the plain mean.

    Example:
        >>> never, always = ({i: (1.0, 0.0) for i in information_sets()}, {i: (0.0, 1.0) for i in information_sets()})
        >>> mixed = average_strategy([never, always])  # check/call vs bet/fold, drawn per hand
        >>> mixed[(JACK, "")], mixed[(JACK, "kb")]  # after its own check only the first strategy is left
        ((0.5, 0.5), (1.0, 0.0))
    """
    checked = [_checked(strategy) for strategy in strategies]
    if not checked:
        raise ValueError("average_strategy needs at least one strategy")

    def own_reach(probabilities: Mapping[InfoSet, tuple[float, ...]], card: int, history: str) -> float:
        seat, reach = player_to_act(history), 1.0
        for length in range(len(history)):
            earlier = history[:length]
            if player_to_act(earlier) == seat:
                action = ACTION_LETTERS.index(history[length])
                reach *= probabilities[(card, earlier)][legal_actions(earlier).index(action)]
        return reach

    average: dict[InfoSet, tuple[float, float]] = {}
    for card, history in information_sets():
        weights = [own_reach(probabilities, card, history) for probabilities in checked]
        if sum(weights) == 0:
            weights = [1.0] * len(checked)
        total = sum(weights)
        first = sum(w * probabilities[(card, history)][0] for w, probabilities in zip(weights, checked, strict=True))
        average[(card, history)] = (first / total, 1.0 - first / total)
    return average
