"""Interop with Gymnasium and PettingZoo, both directions.

Wrap envs as tsmg games (:class:`GymnasiumGame`, :class:`PettingZooGame`) to play them with
language-agent policies, or export any tsmg game as an env with Text spaces
(:func:`to_gymnasium`, :func:`to_pettingzoo_aec`, :func:`to_pettingzoo_parallel`) for code
written against those APIs.
"""

from tsmg.adapters.gymnasium import TEXT_CHARSET, GymnasiumGame, TextGameEnv, to_gymnasium
from tsmg.adapters.pettingzoo import (
    PettingZooAECGame,
    PettingZooGame,
    PettingZooParallelGame,
    TextAECEnv,
    TextObservation,
    TextParallelEnv,
    to_pettingzoo_aec,
    to_pettingzoo_parallel,
)

__all__ = [
    "TEXT_CHARSET",
    "GymnasiumGame",
    "PettingZooAECGame",
    "PettingZooGame",
    "PettingZooParallelGame",
    "TextAECEnv",
    "TextGameEnv",
    "TextObservation",
    "TextParallelEnv",
    "to_gymnasium",
    "to_pettingzoo_aec",
    "to_pettingzoo_parallel",
]
