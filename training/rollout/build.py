"""The run's synchronous rollout source, chosen from its sections: groups or trees, or RTPO's stages.

The sources themselves live in :mod:`training.rollout.sources` (groups and trees) and
:mod:`training.rollout.rtpo`; this module only chooses between them, so that each imports
:mod:`training.rollout.sources` and nothing imports back (no import circle). Under ``loop.mode:
async`` the trainer builds :class:`training.rollout.async_loop.AsyncRollouts` instead, from the whole
configuration, which its worker process rebuilds the model and engine from.
"""

from __future__ import annotations

from training.config import RolloutConfig, RunConfig
from training.distributed import World
from training.rollout.engines import RolloutEngine
from training.rollout.rtpo import ReverseTurnRollouts
from training.rollout.selfplay import Opponents
from training.rollout.sources import GroupRollouts, RolloutSource

__all__ = ["build_rollouts"]


def build_rollouts(
    rollout: RolloutConfig, run: RunConfig, engine: RolloutEngine, world: World, opponents: Opponents
) -> RolloutSource:
    """The rollout source of ``rollout.shape``: RTPO's stages, or groups (of independent episodes or trees).

    Args:
        rollout: The run's rollout section.
        run: The run section (seeds, evaluation).
        engine: The rollout engine (:func:`training.rollout.engines.build_engine`).
        world: This process's place among the training processes.
        opponents: Who plays which seats (:class:`training.rollout.selfplay.Opponents`).
    """
    if rollout.shape == "rtpo":
        return ReverseTurnRollouts(rollout, run, engine, world)
    return GroupRollouts(rollout, run, engine, world, opponents)
