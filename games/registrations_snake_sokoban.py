"""Registrations of Snake (single-player and arena) and Sokoban; no game module is imported here."""

from games.invalid_answers import MS_GRPO_INVALID
from tsmg.registry import register

_SNAKE = "games.snake:Snake"
_SNAKE_ARENA = "games.snake:SnakeArena"
_SOKOBAN = "games.sokoban:Sokoban"

register(
    "Snake-v0",
    _SNAKE,
    **MS_GRPO_INVALID,
    description="10x10 Snake, 5 apples, one random safe-moving enemy, death -2, 8 steps (MS-GRPO training).",
    max_steps=8,
)
register(
    "Snake-20Step-v0",
    _SNAKE,
    **MS_GRPO_INVALID,
    description="10x10 Snake, 5 apples, one random safe-moving enemy, death -2, 20 steps (MS-GRPO evaluation).",
    max_steps=20,
)
register(
    "Snake-100Step-v0",
    _SNAKE,
    description="10x10 Snake, 5 apples, one random safe-moving enemy, death -2, 100 steps.",
    max_steps=100,
)
register(
    "SnakeArena-2p-v0",
    _SNAKE_ARENA,
    description="Two agent snakes moving simultaneously on 10x10 with 5 apples; last alive or 50 steps.",
    num_snakes=2,
    max_steps=50,
    forfeit_after=None,  # a snake without a valid answer keeps its direction: nobody waits for it
)
register(
    "SnakeArena-4p-v0",
    _SNAKE_ARENA,
    description="Four agent snakes moving simultaneously on 10x10 with 5 apples; last alive or 50 steps.",
    num_snakes=4,
    max_steps=50,
    forfeit_after=None,
)
register(
    "Sokoban-v0",
    _SOKOBAN,
    description="Random 6x6 level (outer wall included) with 1-2 boxes, solvable by construction, 30 steps.",
    level="random",
    size=6,
    min_boxes=1,
    max_boxes=2,
    walk_steps=30,
    max_steps=30,
)
register(
    "Sokoban-8x8-v0",
    _SOKOBAN,
    description="Random 8x8 level (outer wall included) with 2-3 boxes, solvable by construction, 60 steps.",
    level="random",
    size=8,
    min_boxes=2,
    max_boxes=3,
    walk_steps=50,
    max_steps=60,
)
register(
    "Sokoban-Classic-v0",
    _SOKOBAN,
    description="One of five small fixed Microban levels (picked by the seed), 60 steps.",
    level="classic",
    max_steps=60,
)
