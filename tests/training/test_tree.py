"""Tree rollouts: the shape grown, the records, one backend call per round, the credit of shared steps, refusals."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

import tsmg
from tests.small_lake import SMALL_LAKE, make_config
from training.advantages import ms_grpo, shared_step_advantage, tree_grpo
from training.config import IncompatibleGameError, TrainConfig, TreeConfig
from training.credit import assign_credit
from training.rollout.tree import TreeBrancher, share_prefix_steps, tree_plans
from training.trainer import train
from tsmg.episode import Episode, StepRecord
from tsmg.policies import RandomPolicy
from tsmg.rollout import EpisodeSnapshot, rollout

GROUP = 8


def grow(game_id, tree, seeds=(3, 4, 5), group_size=GROUP, **game_options):
    config = TrainConfig(
        rollout={
            "game_id": game_id,
            "group_size": group_size,
            "groups_per_update": len(seeds),
            "shape": "tree",
            "tree": tree,
        },
        model={"spec": "tiny"},
    ).rollout
    plans = tree_plans(config, 1, np.random.default_rng(0), 1000)
    brancher = TreeBrancher(config.tree, group_size, plans)
    return rollout(game_id, RandomPolicy(seed=1), plans=plans, game_options=game_options, branch=brancher)


# --------------------------------------------------------------------------- the formulas
def test_tree_grpo_adds_the_intra_tree_term_to_the_group_term():
    returns, trees = [1.0, 0.0, 1.0, 1.0, 0.0], ["a", "a", "b", "b", "c"]
    advantages = tree_grpo(returns, trees, std="population")
    intra = [0.5 / 0.5, -0.5 / 0.5, 0.0, 0.0, 0.0]  # tree a: (R - 0.5) / 0.5; tree b equal; tree c alone
    expected = ms_grpo(returns, std="population") + np.array(intra)
    assert advantages == pytest.approx(expected, abs=1e-5)
    inter = advantages - np.array(intra)
    assert inter.sum() == pytest.approx(0.0, abs=1e-9)  # the group term sums to zero over the group
    for tree in "abc":  # and the tree term over each tree
        members = [index for index, name in enumerate(trees) if name == tree]
        assert (advantages - inter)[members].sum() == pytest.approx(0.0, abs=1e-9)
    assert tree_grpo([1.0, 1.0], ["a", "b"]).tolist() == [0.0, 0.0]


def test_a_shared_step_weighs_its_leaves_by_the_chosen_rule():
    leaves = [2.0, -1.0, 0.5, 0.5]
    mean = np.mean(leaves)
    assert shared_step_advantage(leaves, "mean") == pytest.approx(mean)
    assert shared_step_advantage(leaves, "sqrt") == pytest.approx(2.0 * mean)
    assert shared_step_advantage(leaves, "each") == pytest.approx(4.0 * mean)
    assert shared_step_advantage([3.0], "sqrt") == 3.0  # a step of one leaf is that leaf's


# --------------------------------------------------------------------------- the shape
@pytest.mark.parametrize(
    ("game_id", "tree"),
    [
        ("FrozenLake-NoSlip-v0", {"roots": 2, "fork_every": 1}),  # random maps: many episodes end at once
        ("Snake-v0", {"roots": 1, "branch_factor": 3, "fork_every": 2}),  # chance in the game (apples, enemy)
    ],
)
def test_a_tree_group_has_exactly_group_size_leaves_and_branches_copy_their_parents(game_id, tree):
    episodes = grow(game_id, tree)
    by_group = defaultdict(list)
    for episode in episodes:
        assert episode.error is None
        by_group[episode.group_id].append(episode)
    by_id = {episode.episode_id: episode for episode in episodes}
    branches = 0
    for group, members in by_group.items():
        assert sorted(int(e.episode_id.rsplit("/g", 1)[1]) for e in members) == list(range(GROUP)), group
        assert len({episode.seed for episode in members}) == 1
        for episode in members:
            if episode.parent_id is None:
                continue
            branches += 1
            parent = by_id[episode.parent_id]
            assert parent.group_id == group and episode.fork_round >= 1
            assert episode.fork_round % tree["fork_every"] == 0
            shared = [step for step in episode.steps if step.round < episode.fork_round]
            copied = [step for step in parent.steps if step.round < episode.fork_round]
            assert [(s.observation, s.completion, s.parsed_action) for s in shared] == [
                (s.observation, s.completion, s.parsed_action) for s in copied
            ]
            # The whole branch is a consistent episode: its game replays it to the end.
            EpisodeSnapshot.replay(episode, episode.num_rounds, tsmg.make(game_id))
    assert branches > 0


def test_groups_whose_episodes_all_end_early_start_new_roots():
    # One root, forks every 3 rounds: on random maps most roots fall in a hole before that.
    episodes = grow("FrozenLake-NoSlip-v0", {"roots": 1, "fork_every": 3}, seeds=tuple(range(6)))
    roots = [episode for episode in episodes if episode.parent_id is None]
    assert len(episodes) == 6 * GROUP and len(roots) > 6


def test_the_same_plan_grows_the_same_tree():
    def played():
        episodes = grow("Snake-v0", {"roots": 2, "fork_every": 1})
        return [
            episode.model_dump(exclude={"latency_s": True, "steps": {"__all__": {"latency_s"}}}) for episode in episodes
        ]

    assert played() == played()


def test_every_branch_of_a_round_is_in_one_backend_call_and_a_fork_prompt_is_prefilled_once(tiny_model):
    import backends.hf_generation as generation
    from backends.hf import HFBackend
    from tsmg.lap import LAP, LAPConfig

    backend = HFBackend(tiny_model, threads=1)
    calls, prefills = [], []
    generate = backend.generate

    def counted(requests, sampling):
        calls.append([request.messages[-1]["content"] for request in requests])
        return generate(requests, sampling)

    backend.generate = counted
    original = generation._prefill

    def spied(model, rows, *args):
        forwards = []
        hook = model.register_forward_hook(lambda module, inputs, output: forwards.append(output.logits.shape[0]))
        try:
            return original(model, rows, *args)
        finally:
            hook.remove()
            prefills.append((len(rows), len({tuple(row.prompt_ids) for row in rows}), forwards))

    generation._prefill = spied
    try:
        lap = LAP(
            backend, LAPConfig(action_format={"kind": "choice"}, template={"system": None, "user": "{observation}"})
        )
        config = TrainConfig(
            rollout={
                "game_id": "FrozenLake-v0",
                "game_options": SMALL_LAKE,  # no hole: the root is still playing when it forks
                "group_size": 4,
                "groups_per_update": 2,
                "shape": "tree",
                "tree": {"roots": 1, "fork_every": 1},
            },
            model={"spec": "tiny"},
        ).rollout
        plans = tree_plans(config, 1, np.random.default_rng(0), 1000)
        brancher = TreeBrancher(config.tree, 4, plans)
        episodes = rollout("FrozenLake-v0", lap, plans=plans, game_options=SMALL_LAKE, branch=brancher)
    finally:
        generation._prefill = original
    # Each decision was asked once (a branch's copied steps never), in one call per round for all.
    own = sum(1 for e in episodes for step in e.steps if e.fork_round is None or step.round >= e.fork_round)
    assert sum(len(batch) for batch in calls) == own and len(calls) < own
    # After its first round each root forks: the root and its branch ask the same prompt in the
    # next call, with the other group's root and branch, and the backend computes each prompt once.
    assert len(calls[0]) == 2 and len(calls[1]) == 4 and len(set(calls[1])) == 2
    rows, distinct, forwards = prefills[1]
    assert (rows, distinct) == (4, 2) and forwards[-1] == 2


# --------------------------------------------------------------------------- shared steps
def _episode(episode_id, rounds, reward, parent=None, fork_round=None):
    steps = [StepRecord(index=r, round=r, agent="player", observation=f"{episode_id[:1]}{r}") for r in range(rounds)]
    steps[-1].reward = reward
    return Episode(
        episode_id=episode_id,
        game_id="g",
        group_id="G",
        agents=["player"],
        policies={"player": "m"},
        steps=steps,
        returns={"player": reward},
        parent_id=parent,
        fork_round=fork_round,
    )


def test_shared_steps_are_credited_once_with_their_leaves_combined():
    # root r (3 rounds) -> b forks at round 1 -> c forks from b at round 2; d is a second root.
    episodes = [
        _episode("r", 3, 1.0),
        _episode("b", 3, 0.0, parent="r", fork_round=1),
        _episode("c", 4, 1.0, parent="b", fork_round=2),
        _episode("d", 2, 0.0),
    ]
    flat = assign_credit("ms-grpo", episodes, params={"std": "population"})
    leaf = {item.episode_id: float(item.advantages[0]) for item in flat.trajectories}
    for rule in ("mean", "sqrt"):
        credit = share_prefix_steps(flat, episodes, rule)
        steps = {
            (item.episode_id, index): value
            for item in credit.trajectories
            for index, value in zip(item.step_indices, item.advantages, strict=True)
        }

        def shared(ids, rule=rule):
            return shared_step_advantage([leaf[i] for i in ids], rule)

        assert steps == pytest.approx(
            {
                ("r", 0): shared("rbc"),  # round 0: before both forks, in every leaf of the tree
                ("r", 1): leaf["r"],
                ("r", 2): leaf["r"],
                ("b", 1): shared("bc"),  # b's own round 1, copied by c
                ("b", 2): leaf["b"],
                ("c", 2): leaf["c"],
                ("c", 3): leaf["c"],
                ("d", 0): leaf["d"],
                ("d", 1): leaf["d"],
            }
        )
        assert credit.stats.steps == 9 < flat.stats.steps == 12
    assert share_prefix_steps(flat, episodes, "each") is flat


# --------------------------------------------------------------------------- training and refusals
def test_training_on_trees_credits_each_shared_step_once(tiny_model, tmp_path):
    tree = {"rollout": {"shape": "tree", "tree": {"roots": 1, "fork_every": 1}}, "credit": {"name": "tree-grpo"}}
    result = train(make_config(tmp_path / "tree", tiny_model, run={"updates": 2, "episodes_every": 1}, **tree))
    episodes = [Episode.from_json(line) for line in (tmp_path / "tree" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 * 16 and any(episode.parent_id for episode in episodes)
    steps = sum(len(episode.steps) for episode in episodes)
    shared = sum(1 for e in episodes if e.parent_id for step in e.steps if step.round < e.fork_round)
    assert sum(row["credit/steps"] for row in result.metrics if row["step"]) == steps - shared
    assert all(episode.policy_version == int(episode.episode_id.split("/")[0][1:]) - 1 for episode in episodes)


def test_tree_configurations_that_cannot_work_are_refused(tmp_path):
    with pytest.raises(ValueError, match="tree-grpo.*needs rollout.shape 'tree'"):
        TrainConfig(rollout={"game_id": "FrozenLake-v0"}, model={"spec": "tiny"}, credit={"name": "tree-grpo"})
    with pytest.raises(ValueError, match="rollout.tree only applies"):
        TrainConfig(rollout={"game_id": "FrozenLake-v0", "tree": {"roots": 3}}, model={"spec": "tiny"})
    with pytest.raises(ValueError, match="roots \\(9\\) cannot exceed rollout.group_size \\(8\\)"):
        TrainConfig(rollout={"game_id": "FrozenLake-v0", "shape": "tree", "tree": {"roots": 9}}, model={"spec": "tiny"})
    with pytest.raises(ValueError, match="credit.name 'rtpo' is now rollout.shape 'rtpo'.*choose one shape"):
        TrainConfig(
            rollout={"game_id": "FrozenLake-v0", "shape": "tree"}, model={"spec": "tiny"}, credit={"name": "rtpo"}
        )
    assert TreeConfig().shared_steps == "mean"


@pytest.mark.parametrize("section", [{"rollout": {"shape": "tree"}}, {"rollout": {"shape": "rtpo"}}])
def test_a_game_that_cannot_fork_is_refused_before_any_model_loads(tmp_path, section):
    from tests.two_agent_games import Stones

    class Unforkable(Stones):
        fork_mode = property(lambda self: "none")

    tsmg.register("test/Unforkable-v0", Unforkable)
    try:
        data = {
            "rollout": {"game_id": "test/Unforkable-v0"},
            "model": {"spec": "tiny"},
            "run": {"out_dir": str(tmp_path / "run")},
        }
        for name, values in section.items():
            data[name] = {**data.get(name, {}), **values}
        with pytest.raises(IncompatibleGameError, match="cannot fork \\(its fork_mode is 'none'"):
            train(TrainConfig.model_validate(data))
        assert not (tmp_path / "run").exists()
    finally:
        tsmg.registry.unregister("test/Unforkable-v0")
