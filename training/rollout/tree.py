"""Tree rollouts: the leaves of a group branch from shared prefixes instead of starting apart.

What ``rollout.shape: tree`` plays (``rollout.tree``; after Tree-GRPO, arXiv 2509.21240, and PATR,
arXiv 2607.15610):

* **Shape.** A group is ``rollout.group_size`` leaves (episodes) from one game seed, the same
  episode budget as a group of independent episodes. It starts with ``tree.roots`` root
  episodes. An episode still playing after ``fork_every``, ``2 x fork_every``, ... rounds forks
  into ``branch_factor``: it goes on, and ``branch_factor - 1`` branches start from a fork of its
  game (:meth:`tsmg.core.Game.fork`) with a copy of its record, while the group has leaves left.
  When every episode of a group has ended with leaves left (episodes that end early cannot fork),
  new roots start, so a group always has exactly ``group_size`` leaves. Forks are decided as
  episodes reach their rounds, in the rollout's fixed order, so the same plan grows the same tree.
* **Batching.** Branches join the running lockstep batch at once (:func:`tsmg.rollout.rollout`'s
  ``branch`` hook): every branch of a round is one call of the model, and the branches of one
  fork ask the same prompt, which the HF backend prefills once.
* **Records.** Every leaf is a complete :class:`~tsmg.episode.Episode` (replayable, summarised
  like any other); a branch names its ``parent_id`` and ``fork_round``, and its steps of earlier
  rounds are copies of the parent's. Each branch samples with its own index in the group, so
  branches of one fork differ from the fork on.
* **Credit.** ``tree-grpo`` (:func:`training.advantages.tree_grpo`): each leaf's return
  normalised over the group (inter-tree) plus over its tree (intra-tree); any other assigner sees
  the leaves as a flat group. Then :func:`share_prefix_steps` makes each shared prefix step one
  training sample, with ``n^p`` x the mean of its n leaves' advantages (``rollout.tree.shared_steps``:
  ``mean`` p = 0, each leaf weighs 1/n, the default; ``sqrt`` p = 1/2; ``each`` keeps one copy per
  leaf, the flat baseline that over-weights prefixes). A step belongs to the trajectory of the
  episode that first played it, so the sampler draws it with that trajectory.

Simplifications against the papers: forks happen at fixed round intervals, not at nodes chosen
by the policy's uncertainty (PATR) or sampled from finished trees (Tree-GRPO's expansions); a
fork re-samples the whole turn it forks at (a turn is the unit of a node here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from training.advantages import SharedSteps, shared_step_advantage
from training.config import RolloutConfig, TreeConfig
from training.credit import CreditAssignment, TrajectoryCredit
from tsmg.episode import Episode
from tsmg.rollout import EpisodePlan, RoundEnd


def tree_plans(config: RolloutConfig, update: int, rng: np.random.Generator, seed_limit: int) -> list[EpisodePlan]:
    """The root episodes of one update's trees: ``tree.roots`` per group, ``groups_per_update`` groups.

    Seeds are drawn as :func:`training.rollout.engines.independent_groups` draws them; ids are
    ``u{update}/s{seed}/g{k}``, the branches taking the next ``k`` of their group.
    """
    seeds = rng.choice(seed_limit, size=config.groups_per_update, replace=False)
    plans = []
    for seed in (int(seed) for seed in seeds):
        group = f"u{update}/s{seed}"
        plans += [EpisodePlan(seed, f"{group}/g{k}", group, k) for k in range(config.tree.roots)]
    return plans


@dataclass
class _GroupGrowth:
    seed: int | None
    planned: int
    live: int


class TreeBrancher:
    """The branch hook of one tree rollout: when an episode forks, and when a group starts new roots.

    Args:
        tree: The tree's shape.
        group_size: Leaves per group.
        roots: The rollout's root plans (grouped by ``group_id``).
    """

    def __init__(self, tree: TreeConfig, group_size: int, roots: Sequence[EpisodePlan]) -> None:
        self.tree = tree
        self.group_size = group_size
        self.groups: dict[str, _GroupGrowth] = {}
        for plan in roots:
            if plan.group_id is None:
                raise ValueError(f"tree roots need a group id; {plan.episode_id} has none")
            growth = self.groups.setdefault(plan.group_id, _GroupGrowth(plan.seed, 0, 0))
            growth.planned += 1
            growth.live += 1

    def __call__(self, end: RoundEnd) -> list[EpisodePlan]:
        """New plans after ``end``: branches of a fork, or new roots of a group whose episodes all ended."""
        group = end.plan.group_id
        if group is None or group not in self.groups:
            return []
        growth = self.groups[group]
        room = self.group_size - growth.planned
        if end.done:
            growth.live -= 1
            if growth.live or not room:
                return []
            return self._plans(group, growth, min(room, self.tree.roots), None)
        if not room or end.record.num_rounds % self.tree.fork_every:
            return []
        return self._plans(group, growth, min(room, self.tree.branch_factor - 1), end)

    def _plans(self, group: str, growth: _GroupGrowth, count: int, fork: RoundEnd | None) -> list[EpisodePlan]:
        start = fork.snapshot() if fork is not None else None
        first = growth.planned
        growth.planned += count
        growth.live += count
        return [EpisodePlan(growth.seed, f"{group}/g{k}", group, k, start=start) for k in range(first, first + count)]


def share_prefix_steps(
    credit: CreditAssignment, episodes: Sequence[Episode], shared_steps: SharedSteps
) -> CreditAssignment:
    """Credit each step of a tree once: a shared prefix step with its leaves' advantages combined.

    A step of episode e at round j is shared by e and every episode of the subtrees of e's
    branches that forked after round j (they copied it). It stays in e's trajectory only, with
    :func:`~training.advantages.shared_step_advantage` of those leaves' advantages for it; the
    copies leave their trajectories. ``each`` returns ``credit`` unchanged (every copy trains).

    Args:
        credit: Credit of the tree's episodes as flat leaves (any assigner).
        episodes: The credited episodes (parents and branches; a branch whose parent is missing
            counts as a root).
        shared_steps: How shared steps are weighted.
    """
    if shared_steps == "each":
        return credit
    by_id = {episode.episode_id: episode for episode in episodes}
    children: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        if episode.parent_id in by_id:
            children[str(episode.parent_id)].append(episode)

    def subtree(episode: Episode) -> list[Episode]:
        return [episode] + [member for child in children[episode.episode_id] for member in subtree(child)]

    advantage = credit.step_advantages()
    trajectories = []
    for trajectory in credit.trajectories:
        episode = by_id[trajectory.episode_id]
        copied = episode.fork_round if episode.parent_id in by_id else None
        kept_indices, kept_values = [], []
        for index in trajectory.step_indices:
            step_round = episode.steps[index].round
            if copied is not None and step_round < copied:
                continue  # the parent's step: credited there
            sharers = [episode] + [
                member
                for child in children[episode.episode_id]
                if (child.fork_round or 0) > step_round
                for member in subtree(child)
            ]
            keys = [(member.episode_id, index) for member in sharers]
            values = [advantage[key] for key in keys if key in advantage]
            kept_indices.append(index)
            kept_values.append(shared_step_advantage(values, shared_steps))
        trajectories.append(
            replace(trajectory, step_indices=tuple(kept_indices), advantages=np.array(kept_values, dtype=np.float64))
        )
    return with_trajectories(credit, trajectories)


def with_trajectories(credit: CreditAssignment, trajectories: list[TrajectoryCredit]) -> CreditAssignment:
    """``credit`` with other trajectories (fewer steps, new values); the step counts of its stats follow."""
    values = np.concatenate([item.advantages for item in trajectories]) if trajectories else np.zeros(0)
    stats = replace(
        credit.stats,
        trajectories=len(trajectories),
        steps=int(values.size),
        zero_advantage_steps=int(np.count_nonzero(values == 0.0)),
        mean_abs_advantage=float(np.abs(values).mean()) if values.size else 0.0,
    )
    return CreditAssignment(trajectories, stats)
