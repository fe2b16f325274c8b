"""The demo's set-up as a library: its training configuration, its games and its scripted heuristic.

What the embedded demo (``tsmg demo``, :mod:`tsmg.apps.train.demo`) trains, and what the benches
and ``scripts/identical_runs.py`` start from, without importing the demo's command. Why each
choice of :func:`demo_config` makes the tiny model learn is told in the demo's docstring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.config import TrainConfig

__all__ = ["RANDOM_MAPS_GAME", "STANDARD_GAME", "TEST_SEED_START", "demo_config", "right_or_down"]

STANDARD_GAME = "FrozenLake-v0"
RANDOM_MAPS_GAME = "FrozenLake-NoSlip-v0"
#: Test seeds start here: apart from the training seeds (below 1,000,000) and the validation seeds.
TEST_SEED_START = 2_000_000


def demo_config(
    *,
    random_maps: bool = False,
    out_dir: str | Path = "runs/demo",
    seed: int = 0,
    max_seconds: float | None = None,
    updates: int | None = None,
    eval_episodes: int = 100,
    eval_every: int = 10,
) -> TrainConfig:
    """The demo's training configuration (also a starting point for your own runs).

    Args:
        random_maps: Train on random maps (FrozenLake-NoSlip-v0) instead of the standard map.
        out_dir: The run folder.
        seed: Seed of the run (model weights, rollout seeds, sampling).
        max_seconds: Wall-time budget (default: 180 s standard map, 600 s random maps).
        updates: Most updates (default: 150 standard map, 300 random maps; the random maps' learning
            rate decays linearly over them).
        eval_episodes: Held-out episodes per evaluation.
        eval_every: Evaluate every this many updates.
    """
    game_id = RANDOM_MAPS_GAME if random_maps else STANDARD_GAME
    # Random maps need exploration kept alive (see the module docstring): more maps per update and
    # an entropy bonus over every step of the rollout. One map is learned before that matters.
    loss: dict[str, Any] = {"name": "ppo-clip"}
    schedule: dict[str, Any] = {}
    if random_maps:
        loss.update(entropy_coef=0.1, entropy_scope="rollout")
        # The learning rate decays to a tenth over the planned updates, so that the policy settles.
        schedule = {"schedule": "linear", "min_lr_ratio": 0.1}
    return TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": game_id,
                "group_size": 8,
                "groups_per_update": 16 if random_maps else 8,
                "observation_lines": "[_OPG]+",  # the grid only: P you, O hole, G goal, _ frozen
                "lap": {
                    "template": {"system": None, "user": "{observation}"},
                    "action_format": {"kind": "choice"},
                    "temperature": 1.0,
                },
            },
            # float32 on any CPU (not `auto`, which is bfloat16 with AMX): a 0.15M model gains no speed in
            # bfloat16, and its full fine-tune would round every weight update to 8 bits of mantissa.
            "model": {
                "spec": "tiny",
                "finetune": "full",
                "dtype": "float32",
                "tiny": {"preset": "0.15m", "tokenizer_corpus": "prose"},
            },
            "credit": {"name": "ms-grpo"},
            "sampler": {"name": "aaw"},
            "loss": loss,
            "optim": {"lr": 1e-3, "micro_batch_size": 64, "grad_accumulation": 1, **schedule},
            "run": {
                "out_dir": str(out_dir),
                "seed": seed,
                "updates": updates or (300 if random_maps else 150),
                "max_seconds": max_seconds or (600.0 if random_maps else 180.0),
                "threads": 1,  # a model this small gains nothing from more; one thread never waits on another
                "eval_every": eval_every,
                "eval_episodes": eval_episodes,
                # One map: greedy play would make every held-out episode the same, so sample.
                "eval_temperature": 0.0 if random_maps else None,
            },
        }
    )


def right_or_down(request: Any) -> str:  # Any: it reads Frozen Lake's own game.state, which Game does not declare
    """A heuristic: right or down at random, never into a hole or against a wall while the other is safe.

    It reads the game state (a baseline for scale, not a language policy).
    """
    from games import frozen_lake_rules as rules

    state = request.game.state
    safe = [
        name
        for name, move in (("right", rules.RIGHT), ("down", rules.DOWN))
        if (target := rules.move(state.desc, state.position, move)) != state.position
        and rules.tile(state.desc, target) != "H"
    ]
    options = safe or ["right", "down"]
    return options[int(request.rng(0).integers(len(options)))]
