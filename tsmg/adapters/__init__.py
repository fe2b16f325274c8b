"""Interop with Gymnasium and PettingZoo, both directions.

Wrap envs as tsmg games (:class:`GymnasiumGame`, :class:`PettingZooGame`) to play them with
language-agent policies, or export any tsmg game as an env with Text spaces
(:func:`to_gymnasium`, :func:`to_pettingzoo_aec`, :func:`to_pettingzoo_parallel`) for code
written against those APIs. Shared helpers live in :mod:`tsmg.adapters.common`.
"""

from tsmg.adapters.common import TEXT_CHARSET
from tsmg.adapters.export import (
    TextAECEnv,
    TextGameEnv,
    TextObservation,
    TextParallelEnv,
    to_gymnasium,
    to_pettingzoo_aec,
    to_pettingzoo_parallel,
)
from tsmg.adapters.gymnasium import GymnasiumGame
from tsmg.adapters.pettingzoo import PettingZooGame

__all__ = [
    "TEXT_CHARSET",
    "GymnasiumGame",
    "PettingZooGame",
    "TextAECEnv",
    "TextGameEnv",
    "TextObservation",
    "TextParallelEnv",
    "to_gymnasium",
    "to_pettingzoo_aec",
    "to_pettingzoo_parallel",
]
