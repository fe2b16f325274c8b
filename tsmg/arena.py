"""Evaluating the way Google DeepMind's Game Arena asks a model: the LAP presets and the majority vote.

Game Arena (github.com/google-deepmind/game_arena) lets a model reason freely and reads its move
from a final "Final Answer: X" line, re-prompts ("rethinks") after an illegal move with the reason,
and may sample several answers and play the most common move (its ``MajorityVoteSampler``). Here
these are settings of the :class:`~tsmg.lap.LAPConfig` every LAP has: action format ``final``,
``reprompt``, ``votes``, ``legal_moves``. :data:`LAP_PRESETS` names a set of them (``--lap arena``
on the command line; flags given beside it win), and :func:`majority` is the vote's count.
docs/evaluate.md ("Evaluating like Game Arena") says what differs from Game Arena's harness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["LAP_PRESETS", "majority", "preset_settings"]

#: Named sets of :class:`~tsmg.lap.LAPConfig` settings (keys are its field names; ``action_format`` a
#: dict of :class:`~tsmg.lap.ActionFormat` fields). Settings given explicitly override a preset's.
#:
#: ``arena``: reason freely within 1,024 completion tokens, then name the move on a last line
#: "Final Answer: MOVE" (read by the game's answer rule: exactly one legal move); an illegal or
#: unreadable answer is re-prompted twice with the reason, then the game's ``on_invalid`` rule
#: applies. The legal moves stay listed (``legal_moves="none"`` is Game Arena's default prompt:
#: give it explicitly) and one answer is sampled per decision (``votes`` > 1 for a majority vote).
LAP_PRESETS: dict[str, dict[str, Any]] = {
    "arena": {
        "action_format": {"kind": "final"},
        "max_tokens": 1024,
        "reprompt": 2,
        "legal_moves": "list",
        "votes": 1,
    },
}


def preset_settings(name: str | None) -> dict[str, Any]:
    """The settings of the preset ``name`` (a copy; None: no preset, no settings).

    Raises:
        ValueError: No preset has that name (the message lists them).

    Example:
        >>> preset_settings("arena")["max_tokens"], preset_settings(None)
        (1024, {})
    """
    if name is None:
        return {}
    if name not in LAP_PRESETS:
        raise ValueError(f"no LAP preset {name!r}; the presets are: {', '.join(LAP_PRESETS)}")
    return {key: dict(value) if isinstance(value, dict) else value for key, value in LAP_PRESETS[name].items()}


def majority(moves: Sequence[str | None], rng: np.random.Generator) -> tuple[int | None, dict[str, int]]:
    """The answer whose move most answers name, and the tally of the moves (None: an answer naming no move).

    A tie between moves is broken by ``rng`` (a decision's seeded generator, so the same seed
    plays the same move) among the tied moves in the order they were first named. Answers that
    name no move do not vote; when none names one, the winner is None.

    Returns:
        The index of the first answer naming the winning move (None if no answer names a move),
        and the tally: each move named, with its count, in the order first named.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> majority(["a", None, "b", "b"], rng)
        (2, {'a': 1, 'b': 2})
        >>> majority([None, None], rng)
        (None, {})
    """
    tally = Counter(move for move in moves if move is not None)
    if not tally:
        return None, {}
    top = max(tally.values())
    tied = [move for move in dict.fromkeys(move for move in moves if move is not None) if tally[move] == top]
    winner = tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]
    order = dict.fromkeys(move for move in moves if move is not None)
    return moves.index(winner), {move: tally[move] for move in order}
