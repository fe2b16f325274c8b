"""The tsmg game catalog. Importing this package registers every game (modules load lazily).

Each game is one rules module (pure functions, tested on their own) plus one module with the
text layer and options; ids are versioned (``Name-vN``) and variants are registered with their
own defaults, as in the MS-GRPO authors' configurations where they exist.

Invalid answers follow the general rule (:class:`tsmg.core.RefereedGame`: the turn is used up,
three in a row forfeit) except in the MS-GRPO settings, which follow the authors' code: an
invalid answer plays the first legal move (:data:`MS_GRPO_INVALID`), with the format penalty of
their evaluation (0; their training adds 1: ``-o invalid_penalty=1``).
"""

from games.invalid_answers import MS_GRPO_INVALID
from tsmg.registry import register

__all__ = ["MS_GRPO_INVALID"]

_FROZEN_LAKE = "games.frozen_lake:FrozenLake"

register(
    "FrozenLake-v0",
    _FROZEN_LAKE,
    description="Gymnasium's standard 4x4 Frozen Lake map, not slippery, 16-step limit.",
    map_name="4x4",
    max_steps=16,
)
register(
    "FrozenLake-NoSlip-v0",
    _FROZEN_LAKE,
    **MS_GRPO_INVALID,
    description="Random 4x4 map (p=0.8 frozen) per seed, not slippery, 8 steps (MS-GRPO training/eval).",
    map_name="random",
    size=4,
    p_frozen=0.8,
    max_steps=8,
)
register(
    "FrozenLake-Slippery-v0",
    _FROZEN_LAKE,
    **MS_GRPO_INVALID,
    description="Random 4x4 map (p=0.9 frozen), slippery ice, 15 steps (MS-GRPO evaluation).",
    map_name="random",
    size=4,
    p_frozen=0.9,
    is_slippery=True,
    max_steps=15,
)
register(
    "FrozenLake-BigSlippery-v0",
    _FROZEN_LAKE,
    **MS_GRPO_INVALID,
    description="Random 6x6 map (p=0.9 frozen), slippery ice, 15 steps (MS-GRPO evaluation).",
    map_name="random",
    size=6,
    p_frozen=0.9,
    is_slippery=True,
    max_steps=15,
)

# Other families register in their own modules (registration only: no game module is imported).
from games import (  # noqa: E402, F401
    registrations_adapted,
    registrations_classic,
    registrations_openspiel,
    registrations_snake_sokoban,
    registrations_textarena,
)
