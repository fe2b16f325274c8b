"""The ``view`` option: games that can show a player only what it needs to decide.

A game's full observation explains the rules in every prompt; a small model trained from
scratch learns far faster from the facts that differ between decisions (its card and the
betting in Kuhn poker; the board and whose turn it is in tic-tac-toe). ``view="compact"`` is
that text, written by the game itself, so a configuration names the view instead of a regular
expression over the full text (``rollout.observation_lines`` still works for any game), and an
evaluation of a trained model plays the game the model was trained on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tsmg.core import GameConfig

#: ``full``: the rules, the state and what to answer; ``compact``: the state and whose turn, nothing else.
ObservationView = Literal["full", "compact"]


class ViewConfig(GameConfig):
    """Options of a game that offers a compact observation."""

    view: ObservationView = Field(
        default="full",
        description=(
            "'full': the rules, the state and what to answer; 'compact': only what differs between decisions "
            "(the state and whose turn it is), for small models trained from scratch."
        ),
    )
