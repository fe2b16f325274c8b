"""DAPO's dynamic sampling: groups without signal are dropped and refilled with new ones, up to a cap."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.small_lake import make_config
from training.config import TrainConfig
from training.trainer import train
from tsmg.episode import read_episodes

# Groups of 2 on the 2x2 lake: about half of them see both episodes end alike (no signal).
PAIRS = {"rollout": {"group_size": 2, "groups_per_update": 4}}


def test_with_refill_every_group_an_update_trains_on_carries_signal(tiny_model, tmp_path):
    plain = train(make_config(tmp_path / "plain", tiny_model, run={"updates": 4}, **PAIRS))
    assert any(row["credit/zero_signal_fraction"] > 0 for row in plain.metrics if row["step"])  # the problem is there

    config = make_config(
        tmp_path / "refill",
        tiny_model,
        run={"updates": 4, "episodes_every": 1},
        sampler={"refill_zero_variance": True, "max_refill_rounds": 8},
        **PAIRS,
    )
    rows = [row for row in train(config).metrics if row["step"]]
    assert sum(row["sampler/refilled_groups"] for row in rows) > 0
    played = list(read_episodes(tmp_path / "refill" / "episodes.jsonl"))
    for row in rows:
        assert row["sampler/refill_cap_reached"] == 0.0
        assert (row["credit/groups"], row["credit/zero_signal_fraction"]) == (4, 0.0)  # the target, all with signal
        assert row["sampler/refilled_groups"] <= row["sampler/dropped_groups"]  # a refill replaces a dropped group
        update = [episode for episode in played if episode.episode_id.split("/")[0].split("r")[0] == f"u{row['step']}"]
        assert len(update) == 8 * (1 + row["sampler/refill_rounds"])  # every round played (and recorded)
    assert rows[-1]["rollout/episodes_total"] == len(played)


def test_the_cap_is_reported_when_no_group_can_carry_signal(tiny_model, tmp_path):
    # One step on the 2x2 lake never reaches the goal: every return is 0, no group carries signal.
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"game_options": {"desc": ["SF", "FG"], "max_steps": 1}, "group_size": 2, "groups_per_update": 2},
        run={"updates": 1},
        sampler={"refill_zero_variance": True, "max_refill_rounds": 2},
    )
    [row] = [row for row in train(config).metrics if row["step"]]
    assert row["sampler/refill_cap_reached"] == 1.0 and row["sampler/refill_rounds"] == 2
    assert row["sampler/dropped_groups"] == 2 * 3 and row["sampler/refilled_groups"] == 0
    assert row["rollout/episodes_total"] == 4 * 3 and row["sampler/samples"] == 0


@pytest.mark.parametrize(
    ("sections", "reason"),
    [
        ({"credit": {"name": "marshal"}}, "compares no groups"),
        ({"rollout": {"game_id": "FrozenLake-v0", "shape": "rtpo"}}, "reverse-turn"),
        ({"rollout": {"game_id": "FrozenLake-v0", "shape": "tree"}, "credit": {"name": "tree-grpo"}}, "shape 'groups'"),
        ({"loop": {"mode": "async"}}, "synchronous loop"),
        ({"refill": False}, "only applies with sampler.refill_zero_variance"),
    ],
)
def test_refill_configurations_that_cannot_work_are_refused(sections, reason):
    data = {"rollout": {"game_id": "FrozenLake-v0"}, "model": {"spec": "tiny"}}
    refill = sections.pop("refill", True)
    sampler = {"refill_zero_variance": True} if refill else {"max_refill_rounds": 2}
    data.update({key: {**data.get(key, {}), **value} for key, value in sections.items()})
    with pytest.raises(ValidationError, match=reason):
        TrainConfig.model_validate({**data, "sampler": sampler})


def test_a_first_round_where_every_group_has_signal_is_trained_as_it_is(tiny_model, tmp_path):
    """Every group of the first round carries signal: the update takes exactly those groups, no refill round.

    Kills the mutation ``kept = with_signal[: target_groups - 1]`` in
    ``training/rollout/dynamic_sampling.py:refill_zero_signal`` (one group with signal dropped, then a refill
    round played to replace it), which no other test sees: their first rounds always lack signal somewhere.
    """
    # Groups of 8 on the 2x2 lake: with a success rate near one half, a group whose 8 episodes
    # all end alike is rare, so most first rounds carry signal in every group.
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"group_size": 8, "groups_per_update": 3},
        run={"updates": 2, "episodes_every": 1},
        sampler={"refill_zero_variance": True, "max_refill_rounds": 2},
    )
    rows = {row["step"]: row for row in train(config).metrics if row["step"]}
    played = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))
    checked = 0
    for step, row in rows.items():
        first = [episode for episode in played if episode.episode_id.split("/")[0] == f"u{step}"]
        returns: dict[str, set[float]] = {}
        for episode in first:
            returns.setdefault(episode.group_id or episode.episode_id, set()).add(episode.returns["player"])
        if len(returns) != 3 or any(len(values) < 2 for values in returns.values()):
            continue  # some first-round group without signal: the other tests' case
        checked += 1
        assert (row["credit/groups"], row["credit/zero_signal_fraction"]) == (3, 0.0), row  # exactly the target
        refill = (row["sampler/refill_rounds"], row["sampler/refilled_groups"], row["sampler/dropped_groups"])
        assert refill == (0.0, 0.0, 0.0), f"update {step}: a first round all with signal was refilled: {refill}"
        assert len([episode for episode in played if episode.episode_id.startswith(f"u{step}r")]) == 0  # none played
    assert checked, "no update had signal in every first-round group: the case under test did not happen"
