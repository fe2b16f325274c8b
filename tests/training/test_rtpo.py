"""RTPO: spines, then one update per turn from the last back, each turn's branches trained on that turn only."""

from __future__ import annotations

import pytest

from tests.small_lake import comparable, make_config
from training.rollout.rtpo import ReverseTurnRollouts
from training.trainer import train

RTPO = {"rollout": {"shape": "rtpo", "group_size": 4, "groups_per_update": 3}}


def test_stages_go_from_the_last_turn_back_and_train_only_the_forked_turn(tiny_model, tmp_path, monkeypatch):
    stages = []
    play = ReverseTurnRollouts.play

    def watched(self, step, version=None):
        turn = self.turn
        batch = play(self, step, version)
        stages.append((step, turn, {spine.episode_id: spine for spine in self.spines}, batch.episodes))
        return batch

    monkeypatch.setattr(ReverseTurnRollouts, "play", watched)
    result = train(make_config(tmp_path / "run", tiny_model, run={"updates": 6}, **RTPO))
    turns, cycles = [], 0
    rows = {row["step"]: row for row in result.metrics}
    assert len(stages) == 6
    for step, turn_before, spines, episodes in stages:
        row = rows[step]
        played_spines = [episode for episode in episodes if episode.episode_id.endswith("/spine")]
        branches = [episode for episode in episodes if episode.fork_round is not None]
        if turn_before < 0:  # a new cycle: its spines first, then their last turn
            cycles += 1
            assert len(played_spines) == 3 and all(spine.policy_version == step - 1 for spine in played_spines)
            turn = max(spine.num_rounds for spine in spines.values()) - 1
        else:
            assert not played_spines
            turn = turn_before
        turns.append(turn)
        assert len(branches) == 4 * sum(spine.num_rounds > turn for spine in spines.values())
        for branch in branches:
            spine = spines[branch.parent_id]
            assert branch.fork_round == turn and branch.seed == spine.seed
            copied = [(s.observation, s.completion) for s in spine.steps if s.round < turn]
            assert [(s.observation, s.completion) for s in branch.steps if s.round < turn] == copied
            assert all(record.policy_version == version for record, version in _versions(branch, spine, step))
        trained = sum(1 for branch in branches for s in branch.steps if s.round == turn)
        assert row["credit/steps"] == trained  # only the re-decided turn trains
        # The groups are the branch groups alone (a spine is compared with nothing): zero-signal ones
        # are those whose branches all returned the same.
        groups: dict[str, list[float]] = {}
        for branch in branches:
            groups.setdefault(branch.group_id, []).append(branch.returns["player"])
        flat = sum(len(set(returns)) == 1 for returns in groups.values())
        assert (row["credit/groups"], row["credit/singleton_groups"]) == (len(groups), 0)
        assert row["credit/zero_signal_fraction"] == pytest.approx(flat / len(groups))
    assert cycles == 2, turns  # the first cycle ran its turns down to 0, then new spines came
    first = turns[: turns.index(0) + 1]
    assert first == list(range(first[0], -1, -1))


def _versions(branch, spine, step):
    """The version each of a branch's steps should carry: the spine's for the copied ones, the stage's after."""
    for record in branch.steps:
        if record.round < branch.fork_round:
            yield record, spine.steps[record.index].policy_version
        else:
            yield record, step - 1


@pytest.mark.parametrize("stop_at", [2])
def test_a_resumed_rtpo_run_continues_its_cycle_exactly(tiny_model, tmp_path, stop_at):
    reference = train(make_config(tmp_path / "whole", tiny_model, run={"updates": 5}, **RTPO))
    first = make_config(tmp_path / "cut", tiny_model, run={"updates": stop_at}, **RTPO)
    train(first)
    resumed = train(first.model_copy(update={"run": first.run.model_copy(update={"updates": 5})}), resume=True)
    assert resumed.resumed_from == stop_at
    assert comparable(resumed.metrics) == comparable(reference.metrics)
