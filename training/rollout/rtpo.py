"""RTPO (after arXiv 2608.18682): the last turn updated first, each earlier turn against updated continuations.

What ``rollout.shape: rtpo`` runs, exactly (:class:`ReverseTurnRollouts`):

1. **Spines.** A cycle starts by playing one *spine* episode per seed, ``rollout.groups_per_update``
   seeds drawn as for independent groups. Let T be the longest spine's number of rounds.
2. **Reverse stages.** The cycle's updates take the turns t = T - 1, T - 2, ..., 0, one update
   each. At stage t every spine that reached round t is rebuilt as it stood before turn t (its
   record replayed on a fresh game, :meth:`tsmg.rollout.EpisodeSnapshot.replay`), and
   ``rollout.group_size`` branches start there: each re-decides turn t and plays on to the end
   with the *current* policy, which the stages after t have already updated. Those branches are
   a group (a sparse reverse tree: one level of branches per turn of the spine).
3. **Credit.** The group's returns are scored by the run's group assigner (``credit.name``,
   ``ms-grpo`` by default: normalised within the group) and only each
   branch's turn-t steps train (:meth:`ReverseTurnRollouts.trained_credit`): the continuation
   is the updated policy's evaluation of that decision, not a decision trained here.
4. After stage 0 the next update starts a new cycle with new spines.

So every update is one turn of the spines, updated against a continuation of the policy that
the later turns have already shaped. Episode budget per update: the branches (``group_size`` per
spine that reached the turn) plus, on a cycle's first update, the spines.

Simplifications against the paper: a turn is one game round (every agent acting in it); one
spine per seed and the stages strictly from the last turn of the longest spine (spines shorter
than t sit stage t out); the spine itself is not a member of the groups (its continuation was
played by an older policy); no value model or learned baseline, only the group mean and spread.
Resuming: the cycle's spines and the next turn are saved with each checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from training.config import RolloutConfig, RunConfig
from training.credit import CreditAssignment, comparison_sets
from training.distributed import World
from training.rollout.engines import RolloutBatch, RolloutEngine, play_sharded
from training.rollout.sources import BRANCH_SAMPLING, RolloutSource
from training.rollout.tree import with_trajectories
from tsmg.episode import Episode, read_episodes, write_episodes
from tsmg.registry import make
from tsmg.rollout import EpisodePlan, EpisodeSnapshot
from tsmg.seeding import derive_seed

SPINES_FILE = "rtpo_spines.jsonl"
STAGE_FILE = "rtpo_stage.json"


class ReverseTurnRollouts(RolloutSource):
    """RTPO's rollouts: spines, then one reverse stage (a turn's branch groups) per update."""

    def __init__(self, rollout: RolloutConfig, run: RunConfig, engine: RolloutEngine, world: World) -> None:
        """As :class:`training.rollout.sources.RolloutSource`; the first update starts a cycle."""
        super().__init__(rollout, run, engine, world)
        self.spines: list[Episode] = []
        self.turn = -1  # the next stage's turn; below 0: a new cycle starts

    def play(self, step: int, version: int | None = None) -> RolloutBatch:
        """Update ``step``'s stage: new spines when a cycle ends, then the branches of the next turn back."""
        rollout = self.rollout
        version = step - 1 if version is None else version
        played: list[Episode] = []
        if self.turn < 0:
            rng, seed = self._seeds(step)
            seeds = rng.choice(self.run.eval_seed_start, size=rollout.groups_per_update, replace=False)
            plans = [EpisodePlan(int(game_seed), f"u{step}/s{int(game_seed)}/spine") for game_seed in seeds]
            spines = play_sharded(self.engine, plans, 1, self.world, seed=seed)
            played = self._handed_over(spines, version).episodes
            self.spines = [episode for episode in played if episode.error is None and episode.num_rounds > 0]
            self.turn = max((spine.num_rounds for spine in self.spines), default=0) - 1
        plans = []
        for spine in self.spines:
            if spine.num_rounds <= self.turn:
                continue
            start = EpisodeSnapshot.replay(spine, self.turn, make(rollout.game_id, **rollout.game_options))
            group = f"u{step}/s{spine.seed}/t{self.turn}"
            plans += [
                EpisodePlan(spine.seed, f"{group}/b{k}", group, k, start=start) for k in range(rollout.group_size)
            ]
        seed = derive_seed(self.run.seed, step, BRANCH_SAMPLING)
        branches = play_sharded(self.engine, plans, rollout.group_size, self.world, seed=seed)
        self._handed_over(branches, version)
        self.turn -= 1
        return replace(branches, episodes=played + branches.episodes)

    def trained_credit(self, credit: CreditAssignment, episodes: Sequence[Episode]) -> CreditAssignment:
        """Only the turn each branch re-decided (the round it forked at); spines train nothing."""
        by_id = {episode.episode_id: episode for episode in episodes}
        trajectories = []
        for trajectory in credit.trajectories:
            episode = by_id[trajectory.episode_id]
            kept = [
                (index, value)
                for index, value in zip(trajectory.step_indices, trajectory.advantages, strict=True)
                if episode.fork_round is not None and episode.steps[index].round == episode.fork_round
            ]
            if episode.fork_round is None:
                continue  # a spine: not a member of any group
            trajectories.append(
                replace(
                    trajectory,
                    step_indices=tuple(index for index, _ in kept),
                    advantages=np.array([value for _, value in kept], dtype=np.float64),
                )
            )
        trained = with_trajectories(credit, trajectories)
        # The groups are the branch groups alone: a spine compared with nothing is no zero-signal group.
        groups, zero_signal, singletons = comparison_sets(trajectories)
        stats = replace(trained.stats, groups=groups, zero_signal_groups=zero_signal, singleton_groups=singletons)
        return replace(trained, stats=stats)

    def save(self, folder: Path) -> None:
        """The cycle's spines and the next turn."""
        write_episodes(folder / SPINES_FILE, self.spines)
        (folder / STAGE_FILE).write_text(json.dumps({"turn": self.turn}), encoding="utf-8")

    def load(self, folder: Path) -> None:
        """The cycle saved with the checkpoint ``folder`` (none saved: a new cycle starts)."""
        if (folder / STAGE_FILE).is_file():
            self.spines = list(read_episodes(folder / SPINES_FILE))
            self.turn = int(json.loads((folder / STAGE_FILE).read_text(encoding="utf-8"))["turn"])
