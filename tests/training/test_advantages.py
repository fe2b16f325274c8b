"""Credit assigners: hand-computed numbers and each method's invariants (sum 0 in a group, 0 for equal returns...)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.advantages import (
    anchor_advantages,
    discounted_returns,
    dr_grpo,
    gigpo,
    group_std,
    ms_grpo,
    returns_are_equal,
    rloo,
)
from training.credit import CREDIT_ASSIGNERS, assign_credit, resolve_params
from tsmg.episode import Episode, StepRecord
from tsmg.influence import InfluenceGraph

returns_lists = st.lists(st.floats(min_value=-100, max_value=100, allow_nan=False), min_size=2, max_size=12)
GROUP_ASSIGNERS = {"ms-grpo": ms_grpo, "rloo": rloo, "dr-grpo": dr_grpo}


def make_episode(episode_id, group_id, rewards, *, agent="player", keys=None, agents=None):
    keys = keys or [f"{episode_id}-{index}" for index in range(len(rewards))]
    steps = [
        StepRecord(index=index, round=index, agent=agent, observation="", reward=reward, state_key=key)
        for index, (reward, key) in enumerate(zip(rewards, keys, strict=True))
    ]
    agents = agents or [agent]
    return Episode(
        episode_id=episode_id,
        game_id="g",
        group_id=group_id,
        agents=agents,
        policies=dict.fromkeys(agents, "p"),
        steps=steps,
        returns={agent: float(sum(rewards))},
    )


# ----------------------------------------------------------------------------- hand-computed
def test_ms_grpo_hand_computed_sample_and_population_std():
    # returns 1,0,0,0: mean 0.25; sample std sqrt(0.75 / 3) = 0.5; population std sqrt(0.75 / 4)
    np.testing.assert_allclose(ms_grpo([1, 0, 0, 0], eps=0.0), [1.5, -0.5, -0.5, -0.5])
    population = math.sqrt(0.75 / 4)
    np.testing.assert_allclose(
        ms_grpo([1, 0, 0, 0], std="population", eps=0.0), np.array([0.75, -0.25, -0.25, -0.25]) / population
    )
    np.testing.assert_allclose(ms_grpo([1, 0, 0, 0], eps=0.5), np.array([0.75, -0.25, -0.25, -0.25]) / 1.0)


def test_group_std_of_one_value_is_zero():
    assert group_std([3.0]) == 0.0
    assert group_std([3.0], std="population") == 0.0


def test_rloo_and_dr_grpo_hand_computed():
    np.testing.assert_allclose(rloo([3, 1, 2]), [1.5, -1.5, 0.0])  # 3 - mean(1, 2) = 1.5, ...
    np.testing.assert_allclose(dr_grpo([3, 1, 2]), [1.0, -1.0, 0.0])
    assert rloo([5.0]).tolist() == [0.0]


def test_discounted_returns_hand_computed():
    np.testing.assert_allclose(discounted_returns([1, 0, 1], gamma=0.5), [1.25, 0.5, 1.0])
    np.testing.assert_allclose(discounted_returns([0, 0, 1]), [0.95**2, 0.95, 1.0])
    assert discounted_returns([]).size == 0


def test_gigpo_hand_computed_with_std():
    # Two trajectories: (s: r=0, t: r=1) and (s: r=0, u: r=0); gamma 0.5, F = population std, eps 0.
    advantages = gigpo(
        [1.0, 0.0], [[0.0, 1.0], [0.0, 0.0]], [["s", "t"], ["s", "u"]], gamma=0.5, std="population", eps=0.0
    )
    # Episode term: (1 - 0.5) / 0.5 = 1 and -1. Anchor "s": step returns 0.5 and 0 -> +1, -1. t, u: singletons.
    np.testing.assert_allclose(advantages[0], [2.0, 1.0])
    np.testing.assert_allclose(advantages[1], [-2.0, -1.0])


def test_gigpo_omega_weights_the_step_term():
    kwargs = {"gamma": 1.0, "normalizer": "none"}
    with_step = gigpo([1.0, 1.0], [[1.0], [1.0, 0.0]], [["s"], ["s", "t"]], omega=2.0, **kwargs)
    # Equal episode returns: A^E = 0. Anchor s: step returns 1 and 1 -> 0. So everything is 0.
    assert all(np.all(values == 0) for values in with_step)
    # Returns 1, 0 -> A^E = +-0.5; anchor s: step returns 1, 0 -> A^S = +-0.5; A = A^E + 2 A^S.
    signal = gigpo([1.0, 0.0], [[1.0], [0.0]], [["s"], ["s"]], omega=2.0, **kwargs)
    np.testing.assert_allclose(signal[0], [0.5 + 2 * 0.5])
    np.testing.assert_allclose(signal[1], [-0.5 - 2 * 0.5])


def test_gigpo_gives_step_signal_in_a_group_whose_returns_are_equal():
    # Both reach the goal (return 1) but the first wastes a step: the shared state s has
    # step returns 0.95 * 0.95 vs 0.95 under gamma 0.95, so the step term separates them.
    advantages = gigpo([1.0, 1.0], [[0.0, 0.0, 1.0], [0.0, 1.0]], [["s", "a", "b"], ["s", "b"]], normalizer="none")
    assert advantages[0][0] < 0 < advantages[1][0]


# ----------------------------------------------------------------------------- invariants
@given(returns_lists)
def test_advantages_sum_to_zero_within_a_group(returns):
    for name, assigner in GROUP_ASSIGNERS.items():
        advantages = assigner(returns)
        assert abs(advantages.sum()) <= 1e-9 * max(1.0, np.abs(advantages).max()) * len(returns), name


@given(st.floats(min_value=-100, max_value=100, allow_nan=False), st.integers(min_value=1, max_value=12))
def test_all_equal_group_gives_zero_advantages(value, size):
    for name, assigner in GROUP_ASSIGNERS.items():
        assert np.all(assigner([value] * size) == 0.0), name
    assert np.all(gigpo([value] * size, [[value]] * size, [["s"]] * size)[0] == 0.0)


def test_returns_equal_up_to_rounding_count_as_equal():
    returns = [0.1 + 0.2, 0.3, 0.3]
    assert returns_are_equal(returns)
    assert np.all(ms_grpo(returns) == 0.0)


@given(returns_lists)
def test_rloo_identity(returns):
    size = len(returns)
    leave_one_out = [returns[i] - np.mean(returns[:i] + returns[i + 1 :]) for i in range(size)]
    if returns_are_equal(returns):
        leave_one_out = [0.0] * size
    np.testing.assert_allclose(rloo(returns), leave_one_out, atol=1e-9)
    if not returns_are_equal(returns):
        np.testing.assert_allclose(rloo(returns), size / (size - 1) * (np.array(returns) - np.mean(returns)), atol=1e-9)


@given(st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=1, max_size=10))
def test_singleton_anchor_groups_get_zero(values):
    keys = [f"state-{index}" for index in range(len(values))]
    assert np.all(anchor_advantages(values, keys) == 0.0)


@settings(max_examples=50)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([0.0, 1.0, -1.0])), min_size=1, max_size=5),
        min_size=2,
        max_size=5,
    )
)
def test_gigpo_step_term_sums_to_zero_in_every_anchor_group(trajectories):
    keys = [[key for key, _ in steps] for steps in trajectories]
    rewards = [[reward for _, reward in steps] for steps in trajectories]
    returns = [sum(values) for values in rewards]
    episode_term = ms_grpo(returns)
    advantages = gigpo(returns, rewards, keys)
    step_term = np.concatenate([values - episode_term[i] for i, values in enumerate(advantages)])
    flat_keys = [key for row in keys for key in row]
    for key in set(flat_keys):
        members = [i for i, k in enumerate(flat_keys) if k == key]
        assert abs(step_term[members].sum()) < 1e-6
        if len(members) == 1:
            assert abs(step_term[members[0]]) < 1e-12


# ----------------------------------------------------------------------------- over episodes
def group_of(rewards_by_episode, group_id="g0", **kwargs):
    return [
        make_episode(f"{group_id}-e{i}", group_id, rewards, **kwargs) for i, rewards in enumerate(rewards_by_episode)
    ]


def test_ms_grpo_copies_the_episode_advantage_to_every_step():
    episodes = group_of([[0, 0, 1], [0, 0], [0, 0, 0, 0]])
    credit = assign_credit("ms-grpo", episodes)
    expected = ms_grpo([1, 0, 0])
    for index, trajectory in enumerate(credit.trajectories):
        assert trajectory.step_indices == tuple(range(len(episodes[index].steps)))
        assert np.all(trajectory.advantages == expected[index])
        assert trajectory.sampling_advantage == pytest.approx(abs(expected[index]))
    assert credit.stats.groups == 1 and credit.stats.zero_signal_groups == 0
    assert credit.stats.steps == 9
    step_advantages = credit.step_advantages()
    assert step_advantages[("g0-e0", 2)] == pytest.approx(expected[0])
    assert len(credit.steps()) == 9
    drawn = credit.steps([0, 0, 2])
    assert [(step.trajectory, step.step_index) for step in drawn[:4]] == [(0, 0), (0, 1), (0, 2), (0, 0)]
    assert len(drawn) == 3 + 3 + 4 and drawn[-1].episode_id == "g0-e2"
    assert drawn[-1].advantage == pytest.approx(expected[2])


def test_groups_are_normalised_separately_and_zero_signal_groups_are_counted():
    episodes = group_of([[1], [0]], "a") + group_of([[1], [1], [1]], "b") + [make_episode("solo", None, [1.0])]
    credit = assign_credit("ms-grpo", episodes)
    by_id = {trajectory.episode_id: trajectory for trajectory in credit.trajectories}
    assert by_id["a-e0"].advantages[0] > 0 > by_id["a-e1"].advantages[0]
    assert all(by_id[f"b-e{i}"].advantages[0] == 0 for i in range(3))
    assert by_id["solo"].advantages[0] == 0 and by_id["solo"].group_id == "solo"
    stats = credit.stats
    assert (stats.groups, stats.zero_signal_groups, stats.singleton_groups) == (3, 2, 1)
    assert stats.zero_advantage_steps == 4
    metrics = stats.as_metrics()
    assert metrics["credit/zero_signal_groups"] == 2.0
    assert metrics["credit/zero_signal_fraction"] == pytest.approx(2 / 3)


def test_a_group_with_equal_returns_but_step_signal_is_not_zero_signal():
    # GiGPO: both reach the goal, one wastes a step; the shared state "s" separates them.
    episodes = [
        make_episode("e0", "g", [0.0, 0.0, 1.0], keys=["s", "a", "b"]),
        make_episode("e1", "g", [0.0, 1.0], keys=["s", "b"]),
    ]
    credit = assign_credit("gigpo", episodes, params={"normalizer": "none"})
    assert any(np.any(trajectory.advantages != 0) for trajectory in credit.trajectories)
    assert credit.stats.zero_signal_groups == 0 and credit.stats.as_metrics()["credit/zero_signal_fraction"] == 0.0
    assert assign_credit("ms-grpo", episodes).stats.zero_signal_groups == 1  # the same group, the returns alone


def test_zero_signal_is_not_reported_for_assigners_that_compare_no_groups():
    # opd: every RL advantage is 0 by design (the teacher's term is the signal); marshal compares a seat
    # across the whole update: neither has groups whose signal the metric could count.
    episodes = group_of([[1.0], [0.0]], "a") + group_of([[1.0], [1.0]], "b")
    for name in ("opd", "marshal"):
        metrics = assign_credit(name, episodes).stats.as_metrics()
        assert "credit/zero_signal_fraction" not in metrics and "credit/zero_signal_groups" not in metrics, name
        assert metrics["credit/groups"] >= 1


def test_multi_agent_credit_is_per_agent():
    def duel(episode_id, winner):
        loser = "o" if winner == "x" else "x"
        steps = [
            StepRecord(index=0, round=0, agent="x", observation="", state_key="k0"),
            StepRecord(index=1, round=1, agent="o", observation="", state_key="k1"),
            StepRecord(index=2, round=2, agent="x", observation="", state_key="k2"),
        ]
        steps[2 if winner == "x" else 1].reward = 1.0
        return Episode(
            episode_id=episode_id,
            game_id="duel",
            group_id="g",
            agents=["x", "o"],
            policies={"x": "m", "o": "m"},
            steps=steps,
            returns={winner: 1.0, loser: -1.0},
        )

    episodes = [duel("e0", "x"), duel("e1", "o")]
    credit = assign_credit("rloo", episodes)
    assert [(t.episode_id, t.agent) for t in credit.trajectories] == [
        ("e0", "x"),
        ("e0", "o"),
        ("e1", "x"),
        ("e1", "o"),
    ]
    x0, o0, x1, o1 = credit.trajectories
    assert x0.step_indices == (0, 2) and o0.step_indices == (1,)
    assert x0.episode_return == 1.0 and o0.episode_return == -1.0  # the recorded return, not the step sum
    np.testing.assert_allclose(x0.advantages, [2.0, 2.0])  # x: returns 1, -1 -> rloo +2, -2
    np.testing.assert_allclose(o0.advantages, [-2.0])
    np.testing.assert_allclose(x1.advantages, [-2.0, -2.0])
    np.testing.assert_allclose(o1.advantages, [2.0])
    assert credit.stats.groups == 2
    only_x = assign_credit("rloo", episodes, agent="x")
    assert [t.agent for t in only_x.trajectories] == ["x", "x"]


def test_gigpo_over_episodes_uses_state_keys():
    episodes = [
        make_episode("e0", "g", [0.0, 1.0], keys=["start", "near"]),
        make_episode("e1", "g", [0.0, 0.0], keys=["start", "far"]),
    ]
    credit = assign_credit("gigpo", episodes, params={"gamma": 0.5, "std": "population", "eps": 1e-12})
    np.testing.assert_allclose(credit.trajectories[0].advantages, [2.0, 1.0])
    np.testing.assert_allclose(credit.trajectories[1].advantages, [-2.0, -1.0])


def test_gigpo_refuses_steps_without_state_keys():
    episodes = group_of([[0.0], [1.0]])
    for episode in episodes:
        episode.steps[0].state_key = None
    with pytest.raises(ValueError, match="state key"):
        assign_credit("gigpo", episodes)


def test_unknown_names_agents_and_params_are_refused_with_the_choices():
    episodes = group_of([[0.0], [1.0]])
    with pytest.raises(ValueError, match="ms-grpo"):
        assign_credit("grpo-typo", episodes)
    with pytest.raises(ValueError, match="play in none"):
        assign_credit("ms-grpo", episodes, agent="nobody")
    with pytest.raises(ValueError, match="gamma"):
        assign_credit("ms-grpo", episodes, params={"gamma": 0.9})
    with pytest.raises(ValueError):
        resolve_params("gigpo", {"gamma": 2.0})


def test_registry_declares_needs():
    assert CREDIT_ASSIGNERS["gigpo"].needs == {"groups", "state_keys"}
    assert CREDIT_ASSIGNERS["mt-grpo"].needs == {"groups", "per_step_rewards"}
    group_scoped = [spec for name, spec in CREDIT_ASSIGNERS.items() if spec.scope == "group" and name != "opd"]
    assert all("groups" in spec.needs for spec in group_scoped)
    assert {"ms-grpo", "rloo", "dr-grpo", "gigpo"} <= set(CREDIT_ASSIGNERS)


def test_every_assigner_gives_one_finite_advantage_per_step():
    episodes = group_of([[0.0, 1.0], [0.5], [0.0, 0.0, -1.0]])
    for episode in episodes:  # what iapo routes along: here graphs without edges (it then equals ms-grpo)
        episode.influence["exact"] = InfluenceGraph()
    for name in CREDIT_ASSIGNERS:
        credit = assign_credit(name, episodes)
        for episode, trajectory in zip(episodes, credit.trajectories, strict=True):
            assert trajectory.advantages.shape == (len(episode.steps),)
            assert np.all(np.isfinite(trajectory.advantages))
