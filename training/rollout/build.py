"""The run's rollout source, chosen from its configuration: groups or trees, RTPO's stages, or a worker.

The sources themselves live in :mod:`training.rollout.sources` (groups and trees), :mod:`training.rollout.rtpo`
and :mod:`training.rollout.async_loop`; this module only chooses among them, so that each imports
:mod:`training.rollout.sources` and nothing imports back (no import circle).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.config import TrainConfig
from training.distributed import World
from training.rollout.async_loop import AsyncRollouts
from training.rollout.engines import RolloutEngine
from training.rollout.rtpo import ReverseTurnRollouts
from training.rollout.selfplay import Opponents
from training.rollout.sources import GroupRollouts, RolloutSource

__all__ = ["build_rollouts"]


def build_rollouts(
    config: TrainConfig,
    world: World,
    make_engine: Callable[..., RolloutEngine],
    *,
    setup: Any,
    update: Any,
    run_dir: Path,
    opponents: Opponents,
    start_step: int = 0,
) -> RolloutSource:
    """The run's rollout source: RTPO's stages, groups or trees, played ahead by a worker under ``loop.mode: async``.

    Args:
        config: The run's configuration.
        world: This process's place among the training processes.
        make_engine: ``make_engine(backend, on_vllm=True)``: the rollout engine over ``backend``
            (:func:`training.rollout.engines.build_engine`).
        setup: The training setup (its backend is the trained model).
        update: The update stage (asynchronous mode recomputes stale samples' pi_old with it).
        run_dir: The run folder.
        opponents: Who plays which seats (:class:`training.rollout.selfplay.Opponents`); groups seated one
            by one (a rotating seat, an opponent pool) play synchronously, as groups.
        start_step: Updates done before this session (a resumed run).

    Raises:
        ValueError: Asynchronous training with several processes (not supported).
    """
    if config.loop.mode == "async":
        return AsyncRollouts(
            config,
            make_engine(setup.backend, on_vllm=False),  # evaluations: the trainer's own weights, on its model
            world,
            setup=setup,
            update=update,
            run_dir=run_dir,
            model_seats=opponents.model_seats,
            start_step=start_step,
        )
    engine = make_engine(setup.backend)
    if config.rollout.shape == "rtpo":
        return ReverseTurnRollouts(config.rollout, config.run, engine, world)
    return GroupRollouts(config.rollout, config.run, engine, world, opponents)
