"""DAPO's dynamic sampling (arXiv 2503.14476): drop the groups that carry no signal and refill with new ones.

A group whose credit is 0 on every step (for the group-normalised assigners: its episodes all
returned the same) adds nothing to the policy gradient, yet it counts in the update's batch, so
the batch's effective size shrinks as the policy gets uniformly good or bad. With
``sampler.refill_zero_variance`` the trainer (:func:`refill_zero_signal`) keeps the rollout's
groups that carry signal, then plays rounds of ``rollout.groups_per_update`` new groups (new
seeds; :meth:`training.rollout.sources.GroupRollouts.play_refill`) and adds their groups with signal,
until the update has ``groups_per_update`` of them or ``sampler.max_refill_rounds`` extra rounds
were played (the cap: the update then trains on the groups it has, and
``sampler/refill_cap_reached`` says so). Groups with signal beyond the target are left out, as
DAPO fills its batch and stops. "Signal" is :func:`training.credit.carries_signal`, the measure
of ``credit/zero_signal_fraction``.

Every episode played counts towards ``run.episodes``; the rollout metrics describe the first
round (the policy's rollout as drawn), the credit metrics the groups the update trains on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from training.credit import CreditAssignment, carries_signal
from training.rollout.selfplay import group_key
from tsmg.episode import Episode

if TYPE_CHECKING:
    from training.rollout.engines import RolloutBatch


@dataclass
class Refilled:
    """What the update trains on after dynamic sampling.

    Attributes:
        episodes: The episodes of the kept groups (every one of them carries signal unless the cap was reached).
        credit: Their credit assignment.
        played: Every episode the refill rounds played (kept or not), to count and record.
        metrics: ``sampler/dropped_groups`` (groups without signal, over every round),
            ``sampler/refilled_groups`` (groups with signal taken from the refill rounds),
            ``sampler/refill_rounds`` and ``sampler/refill_cap_reached`` (1: still short of the
            target after the last allowed round).
    """

    episodes: list[Episode]
    credit: CreditAssignment
    played: list[Episode]
    metrics: dict[str, float]


def groups_with_signal(episodes: Sequence[Episode], credit: CreditAssignment) -> list[str]:
    """The group ids (in episode order) of the groups whose credit is not 0 everywhere, any seat's."""
    advantages: dict[str, list] = {}
    for trajectory in credit.trajectories:
        advantages.setdefault(trajectory.group_id, []).append(trajectory.advantages)
    order = list(dict.fromkeys(map(group_key, episodes)))
    return [group for group in order if carries_signal(advantages.get(group, []))]


def refill_zero_signal(
    episodes: Sequence[Episode],
    credit: CreditAssignment,
    *,
    target_groups: int,
    max_rounds: int,
    play_round: Callable[[int], RolloutBatch],
    credit_of: Callable[[Sequence[Episode]], CreditAssignment],
) -> Refilled:
    """Keep the groups with signal and play refill rounds until there are ``target_groups`` of them (capped).

    Args:
        episodes: The rollout's finished episodes (failed ones left out).
        credit: Their credit assignment.
        target_groups: How many groups with signal the update wants (``rollout.groups_per_update``).
        max_rounds: The most refill rounds to play.
        play_round: Plays refill round r (from 1): new groups (failed episodes included).
        credit_of: The run's credit assignment of some episodes.

    Returns:
        The kept episodes, their credit, the refill episodes played, and the metrics.
    """
    first = set(map(group_key, episodes))
    with_signal = groups_with_signal(episodes, credit)
    kept = with_signal[:target_groups]
    dropped = len(first) - len(with_signal)
    pool = list(episodes)
    played: list[Episode] = []
    rounds = 0
    while len(kept) < target_groups and rounds < max_rounds:
        rounds += 1
        new = list(play_round(rounds).episodes)
        played += new
        finished = [episode for episode in new if episode.error is None]
        if not finished:
            continue
        signal = groups_with_signal(finished, credit_of(finished))
        dropped += len(set(map(group_key, finished))) - len(signal)
        kept += signal[: target_groups - len(kept)]
        pool += finished
    refilled = sum(1 for group in kept if group not in first)
    metrics = {
        "sampler/dropped_groups": float(dropped),
        "sampler/refilled_groups": float(refilled),
        "sampler/refill_rounds": float(rounds),
        "sampler/refill_cap_reached": float(len(kept) < target_groups),
    }
    if not kept:  # nothing carries signal even after the refills: the rollout as it was (the sampler draws nothing)
        return Refilled(list(episodes), credit, played, metrics)
    wanted = set(kept)
    chosen = [episode for episode in pool if group_key(episode) in wanted]
    return Refilled(chosen, credit_of(chosen), played, metrics)
