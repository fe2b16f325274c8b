"""What a TextArena answer plays: which ids list every move, and how an answer is compared with a move.

**Listed or open text.** An id's moves are *listed* when the moves its messages announce in
brackets (``[up]``, ``'[4]'``, ``[check]``), and TextArena accepts, are every move TextArena
takes there; then an answer is a move only when it names exactly one of them (:mod:`tsmg.answers`)
and nothing else reaches TextArena. Its moves are *open text* when TextArena also takes answers
that play as none of those moves: free speech relayed to the other seats (negotiation, Mafia's
discussion, Taboo's clues), offers and bids built from numbers, coordinates the prompt shows only by
example, or a turn whose messages announce no move at all. :data:`LISTED_MOVES` holds the listed
ids; every other id, and any environment registered in TextArena later, is open text.

The split is TextArena's behaviour, not a reading of its rules: ``bench/textarena_fuzz.py --derive``
plays seeded random episodes of every id and, at each turn, tries on a copy of the environment a
neutral sentence (:data:`NEUTRAL_ANSWER`), the moves listed at the id's other turns, the listed
moves with their numbers changed, the bracketed texts of the seat's messages with their numbers
changed, and a vocabulary of bracketed words; an id is open text as soon as a turn announces no
move, relays the neutral sentence to another seat, or takes a probe that plays as none of the
announced moves and not as the neutral sentence does (the game's own reading of nonsense, such as
Surround's crash), or announces more moves than the adapter tries (``MAX_CANDIDATES``); and the
variants of a family (``Othello-v0``, ``Othello-v0-small``...) run the same code, so evidence on
one makes the family open text (Othello's forced skip relays any sentence). What was played is :func:`play_signature`:
TextArena's ``game_state``, whose turn it is, whether it is over and its rewards (the messages
aside, which echo the answer's text).

**Open text, read strictly where it can be.** On an open-text id an answer that names one announced
move plays it; any other answer goes to TextArena on a copy and is refused when TextArena refuses
it, when two bracketed parts of it would each be taken alone and play differently while TextArena
plays only one of them (two moves in one answer), or, on a turn that takes no speech, when it plays
as an announced move or one of its own bracketed parts without being that move's name (a sentence
around a move, several moves of which one is kept). Otherwise it plays, and the record holds the
announced move it played as on a turn of speech, or the answer itself (free speech, an offer, a
combined bid: what TextArena executed).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Sequence
from typing import Any

from tsmg.answers import normalize_answer

__all__ = ["LISTED_MOVES", "NEUTRAL_ANSWER", "bracketed", "named_moves", "play_signature", "relays"]

#: A sentence that names no move in any TextArena game: TextArena's reading of it tells a turn of speech
#: (relayed to the other seats) and the game's handling of nonsense.
NEUTRAL_ANSWER = "Let me think about this for a moment."

#: TextArena ids whose moves are listed (derived by ``bench/textarena_fuzz.py --derive``; tests re-derive some).
LISTED_MOVES: frozenset[str] = frozenset({
    "2048-v0", "2048-v0-10x10", "2048-v0-3x3", "2048-v0-5x5", "2048-v0-6x6", "2048-v0-8x8", "2048-v0-easy",
    "2048-v0-extreme", "2048-v0-hard", "2048-v0-mega-easy", "2048-v0-super-easy", "2048-v0-ultra-easy",
    "2048-v0-very-easy", "2048-v0-very-hard", "Blackjack-v0", "Blackjack-v0-long", "FifteenPuzzle-v0",
    "FrozenLake-v0", "FrozenLake-v0-hardcore", "FrozenLake-v0-random", "GameOfPureStrategy-v0", "HighSociety-v0",
    "IteratedMatchingPennies-v0", "IteratedRockPaperScissors-v0", "KuhnPoker-v0", "KuhnPoker-v0-extreme",
    "KuhnPoker-v0-long", "KuhnPoker-v0-medium", "KuhnPoker-v0-short",
    "PigDice-v0", "PigDice-v0-100", "PigDice-v0-150", "PigDice-v0-200",
    "PigDice-v0-250", "PigDice-v0-300", "PigDice-v0-350", "PigDice-v0-400", "PigDice-v0-450", "PigDice-v0-50",
    "PigDice-v0-500", "PigDice-v0-long", "PigDice-v0-short", "Secretary-v0", "Secretary-v0-long", "SimpleTak-v0",
    "SimpleTak-v0-extreme", "SimpleTak-v0-large", "SimpleTak-v0-medium", "Snake-v0", "Snake-v0-large",
    "Snake-v0-standard", "Sokoban-v0", "Surround-v0", "Surround-v0-large",
    "Surround-v0-standard", "ThreeCardMonte-v0", "ThreePlayerGOPS-v0", "ThreePlayerTicTacToe-v0", "TicTacToe-v0",
    "WildTicTacToe-v0",
})  # fmt: skip

_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")


def play_signature(env: Any) -> bytes:
    """What TextArena's ``env`` holds as played: its ``game_state``, whose turn, done and rewards (messages aside)."""
    state = env.state
    played = (getattr(state, "game_state", None), state.current_player_id, bool(state.done), state.rewards)
    try:
        return pickle.dumps(played, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a lambda or a handle in a game's state: its text stands for it
        return repr(played).encode()


def relays(env: Any, text: str, player: int) -> bool:
    """Whether ``env`` queued ``text`` (stripped) in a message to a seat other than ``player``."""
    needle = text.strip()
    return any(
        needle in str(message[1])
        for seat, queued in env.state.observations.items()
        if seat != player
        for message in queued
    )


def bracketed(text: str) -> list[str]:
    """The bracketed parts of ``text`` (``[A4]``, ``[Offer: 1 Wheat -> 2 Wood]``), each once, inner spaces collapsed."""
    return list(dict.fromkeys(" ".join(found.split()) for found in _BRACKETED.findall(text)))


def named_moves(text: str, moves: Sequence[str]) -> list[str]:
    """The ``moves`` whose names (case and brackets aside) occur in ``text`` as whole words, in the answer's order.

    Example:
        >>> named_moves("[RIGHT] then [up]", ["[up]", "[down]", "[right]"])
        ['[right]', '[up]']
        >>> named_moves("[10]", ["[1]", "[10]"])
        ['[10]']
    """
    folded = " ".join(text.lower().split())
    found = {}
    for move in moves:
        name = normalize_answer(move)
        hit = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded) if name else None
        if hit:
            found[move] = hit.start()
    return sorted(found, key=found.__getitem__)
