"""MT-GRPO, PGPO and GRAFT: hand-computed small cases and each method's invariants (ALGORITHMS.md)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.advantages import graft, ms_grpo, mt_grpo, pgpo, state_potentials
from training.credit import CREDIT_ASSIGNERS, assign_credit
from tsmg.episode import Episode, StepRecord

R2 = math.sqrt(2.0)
POPULATION = {"std": "population", "eps": 0.0}


# ----------------------------------------------------------------------------- MT-GRPO
def test_mt_grpo_two_winners_of_different_lengths_get_the_same_final_credit():
    # The old K-turn form lined turns up by index and gave the first episode's winning last step 0
    # while the second's got +0.71 (it was compared with a turn of the first that won nothing).
    first, second = mt_grpo([[0.0, 0.0, 1.0], [0.0, 1.0]])
    assert first[-1] == second[-1] == 0.0  # both won: the same outcome, the same credit
    np.testing.assert_array_equal(first, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(second, [0.0, 0.0])
    winner, loser = mt_grpo([[0.0, 0.0, 1.0], [0.0, 0.0]], **POPULATION)
    np.testing.assert_allclose(winner, [1.0, 1.0, 1.0])  # A^T = 0 everywhere, A^O = +1 on every turn
    np.testing.assert_allclose(loser, [-1.0, -1.0])


def test_mt_grpo_hand_computed_aligned_from_the_start():
    # Outcomes (last rewards) 1, 0, 1: mean 2/3, population std sqrt(2)/3 -> A^O = 1/sqrt2, -sqrt2, 1/sqrt2.
    # Slot 0 (first turns) 1, 0, 0 -> sqrt2, -1/sqrt2, -1/sqrt2; slot 1: 0, 0 -> 0.
    a, b, c = mt_grpo([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0]], **POPULATION)
    np.testing.assert_allclose(a, [R2 + 1 / R2, 1 / R2, 1 / R2])
    np.testing.assert_allclose(b, [-1 / R2 - R2, -R2, -R2])
    np.testing.assert_allclose(c, [0.0, 1 / R2], atol=1e-12)


def test_mt_grpo_hand_computed_aligned_from_the_end():
    # Slot 0 = the turn before the last: 0 (a), 0 (b), 0 (c's first) -> 0.
    # Slot 1 = two before the last: 1 (a), 0 (b) -> +1, -1. Outcomes as above.
    a, b, c = mt_grpo([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0]], align="end", **POPULATION)
    np.testing.assert_allclose(a, [1.0 + 1 / R2, 1 / R2, 1 / R2])
    np.testing.assert_allclose(b, [-1.0 - R2, -R2, -R2])
    np.testing.assert_allclose(c, [1 / R2, 1 / R2])
    # With a turn reward in the slot before the last, "end" compares it with the others' last-but-one turns.
    a, b = mt_grpo([[0.0, 1.0, 0.0], [1.0, 0.0]], align="end", **POPULATION)
    np.testing.assert_allclose(a, [0.0, 0.0, 0.0])  # slot 0: 1 vs 1 -> 0; slot 1: only a -> 0; outcomes equal
    np.testing.assert_allclose(b, [0.0, 0.0])
    a, b = mt_grpo([[0.0, 1.0, 0.0], [1.0, 0.0]], align="start", **POPULATION)
    np.testing.assert_allclose(a, [-1.0, 0.0, 0.0])  # slot 0: 0 vs 1
    np.testing.assert_allclose(b, [1.0, 0.0])


def test_mt_grpo_lambda_weights_the_outcome_on_non_final_turns_only():
    a, b = mt_grpo([[0.0, 1.0], [0.0, 0.0]], outcome_weight=0.5, **POPULATION)
    np.testing.assert_allclose(a, [0.5, 1.0])  # non-final: A^T 0 + 0.5 x A^O; final: A^O
    np.testing.assert_allclose(b, [-0.5, -1.0])


turn_rewards = st.lists(
    st.lists(st.sampled_from([0.0, 1.0, -1.0, 2.0]), min_size=1, max_size=5), min_size=2, max_size=6
)


@settings(max_examples=60)
@given(turn_rewards, st.sampled_from(["start", "end"]), st.floats(min_value=0.0, max_value=2.0))
def test_mt_grpo_invariants(trajectories, align, outcome_weight):
    advantages = mt_grpo(trajectories, align=align, outcome_weight=outcome_weight)
    outcome = ms_grpo([rewards[-1] for rewards in trajectories])
    # The final turn carries the outcome term alone.
    np.testing.assert_allclose([values[-1] for values in advantages], outcome, atol=1e-9)
    # Turn terms (advantage - lambda A^O) sum to 0 within every aligned slot.
    slots: dict[int, float] = {}
    for index, rewards in enumerate(trajectories):
        for turn in range(len(rewards) - 1):
            slot = turn if align == "start" else len(rewards) - 2 - turn
            slots[slot] = slots.get(slot, 0.0) + advantages[index][turn] - outcome_weight * outcome[index]
    assert all(abs(total) < 1e-6 for total in slots.values())


@settings(max_examples=40)
@given(turn_rewards, st.data())
def test_mt_grpo_outcome_term_does_not_count_turn_rewards(trajectories, data):
    # Changing a non-final reward changes no final turn's credit (the old form normalised the return).
    index = data.draw(st.integers(0, len(trajectories) - 1))
    if len(trajectories[index]) < 2:
        return
    changed = [list(rewards) for rewards in trajectories]
    changed[index][0] += 5.0
    before = [values[-1] for values in mt_grpo(trajectories)]
    after = [values[-1] for values in mt_grpo(changed)]
    np.testing.assert_allclose(before, after)


# ----------------------------------------------------------------------------- PGPO / GRAFT fixture
# Three trajectories from one start s (gamma 0.5):
#   t1: s -> a (0), a -> goal (1), terminated, success
#   t2: s -> b (0), b -> hole (0), terminated
#   t3: s -> a (0), a -> hole (0), terminated
REWARDS = [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
KEYS = [["s", "a"], ["s", "b"], ["s", "a"]]
NEXT = [["a", "goal"], ["b", "hole"], ["a", "hole"]]
TERMINAL = [True, True, True]
SUCCESS = [1.0, 0.0, 0.0]


def test_state_potentials_are_mean_step_returns():
    returns = [np.array([0.5, 1.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0])]
    assert state_potentials(returns, KEYS) == {"s": pytest.approx(1 / 6), "a": 0.5, "b": 0.0}


def test_pgpo_hand_computed():
    t1, t2, t3 = pgpo(REWARDS, KEYS, NEXT, TERMINAL, SUCCESS, gamma=0.5, **POPULATION)
    # Anchor s: step returns 0.5, 0, 0 -> A^S = sqrt2, -1/sqrt2, -1/sqrt2.
    #   Phi(s) = 1/6, Phi(a) = 0.5, Phi(b) = 0 -> delta = 0.25 - 1/6, 0 - 1/6, 0.25 - 1/6
    #   -> A^phi = 1/sqrt2, -sqrt2, 1/sqrt2.
    # Anchor a: returns 1, 0 -> A^S = 1, -1; terminal delta = 0.5 x 1 - 0.5, 0.5 x 0 - 0.5 -> A^phi = 1, -1.
    # Anchor b: one visit -> 0. Success rate 1/3 -> w = (2/3)^2 = 4/9.
    w = 4 / 9
    np.testing.assert_allclose(t1, [R2 + w / R2, 1.0 + w])
    np.testing.assert_allclose(t2, [-1 / R2 - w * R2, 0.0])
    np.testing.assert_allclose(t3, [-1 / R2 + w / R2, -1.0 - w])


def test_pgpo_failed_actions_of_one_anchor_share_the_step_term_but_not_the_potential_term():
    # t2 and t3 both fail from s with step return 0 (same A^S), but t3 moved to a, a state from
    # which the group once succeeded, and t2 to b: PGPO ranks t3's move above t2's.
    _, t2, t3 = pgpo(REWARDS, KEYS, NEXT, TERMINAL, SUCCESS, gamma=0.5)
    gigpo_like = pgpo(REWARDS, KEYS, NEXT, TERMINAL, SUCCESS, gamma=0.5, beta=0.0)
    assert gigpo_like[1][0] == pytest.approx(gigpo_like[2][0])  # A^S alone: equal
    assert t3[0] > t2[0]


def test_pgpo_weight_vanishes_when_every_episode_succeeds():
    t1, t2, t3 = pgpo(REWARDS, KEYS, NEXT, TERMINAL, [1.0, 1.0, 1.0], gamma=0.5)
    only_anchor = pgpo(REWARDS, KEYS, NEXT, TERMINAL, SUCCESS, gamma=0.5, beta=0.0)
    for values, expected in zip((t1, t2, t3), only_anchor, strict=True):
        np.testing.assert_allclose(values, expected)


def test_pgpo_truncated_end_uses_the_next_states_potential():
    # Two truncated trajectories: from s, one to x (where another step later earned 1), one to y.
    rewards = [[0.0], [0.0], [1.0]]
    keys = [["s"], ["s"], ["x"]]
    nexts = [["x"], ["y"], ["z"]]
    a, b, _ = pgpo(rewards, keys, nexts, [False, False, True], [0.0, 0.0, 1.0], gamma=1.0, **POPULATION)
    # Phi(x) = 1, Phi(y) = 0 (never a decision state) -> delta(s->x) = 1 - 0 > delta(s->y) = 0 - 0.
    assert a[0] > 0 > b[0]


def test_pgpo_counts_a_reward_earned_before_the_end_for_the_step_that_earned_it():
    # From s, one move eats an apple (+1) and reaches t, the other reaches u; both episodes then stop
    # (truncated), and neither t nor u is ever a decision state (Phi = 0). gamma 0.5, population std.
    rewards = [[1.0], [0.0]]
    a, b = pgpo(rewards, [["s"], ["s"]], [["t"], ["u"]], [False, False], [0.0, 0.0], gamma=0.5, **POPULATION)
    # A^S: returns 1, 0 -> +1, -1. delta = 1 + 0 - 0.5, 0 + 0 - 0.5 -> +1, -1; w = 1.
    np.testing.assert_allclose(a, [2.0])
    np.testing.assert_allclose(b, [-2.0])


def test_pgpo_terminal_and_continuing_moves_from_one_state():
    # From s (gamma 0.5, population std): t1 ends at the goal (reward 1); t2 goes to c and wins from there;
    # t3 goes to c and loses; t4 goes to d and loses. Phi(s) = (1 + 0.5 + 0 + 0) / 4, Phi(c) = 0.5, Phi(d) = 0.
    rewards = [[1.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    keys = [["s"], ["s", "c"], ["s", "c"], ["s", "d"]]
    nexts = [["goal"], ["c", "goal"], ["c", "hole"], ["d", "hole"]]
    advantages = pgpo(rewards, keys, nexts, [True] * 4, [1.0, 1.0, 0.0, 0.0], gamma=0.5, **POPULATION)
    phi_s = 1.5 / 4
    delta = np.array([0.5 * 1.0, 0.5 * 0.5, 0.5 * 0.5, 0.0]) - phi_s  # terminal: gamma r_final - Phi(s)
    returns = np.array([1.0, 0.5, 0.0, 0.0])
    expected = (returns - returns.mean()) / returns.std() + 0.25 * (delta - delta.mean()) / delta.std()
    np.testing.assert_allclose([values[0] for values in advantages], expected)


def test_graft_hand_computed_values_and_td():
    t1, t2, t3 = graft(REWARDS, KEYS, NEXT, TERMINAL, gamma=0.5)
    # V(a) = (1 + 0) / 2 = 0.5, V(b) = 0, V(s) = (0.25 + 0 + 0.25) / 3 = 1/6 (terminal nodes: 0).
    np.testing.assert_allclose(t1, [0.25 - 1 / 6, 1.0 - 0.5])
    np.testing.assert_allclose(t2, [0.0 - 1 / 6, 0.0])
    np.testing.assert_allclose(t3, [0.25 - 1 / 6, 0.0 - 0.5])


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_graft_graph_gae_equals_one_step_td_on_a_converged_graph(lam):
    # A graph with a cycle (a move into a wall keeps the state) and a truncated end.
    rewards = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 0.0, 0.0]]
    keys = [["s", "s", "a"], ["s", "b"], ["s", "a", "b"]]
    nexts = [["s", "a", "goal"], ["b", "hole"], ["a", "b", "c"]]
    terminal = [True, True, False]
    advantages = graft(rewards, keys, nexts, terminal, gamma=0.9, lam=lam)
    td = graft(rewards, keys, nexts, terminal, gamma=0.9, lam=0.0)
    for values, expected in zip(advantages, td, strict=True):
        np.testing.assert_allclose(values, expected, atol=1e-8)
    # And every state's out-edges' TD errors average to 0 (the Bellman equation holds).
    flat = {}
    for row_keys, row in zip(keys, td, strict=True):
        for key, value in zip(row_keys, row, strict=True):
            flat.setdefault(key, []).append(value)
    assert all(abs(np.mean(values)) < 1e-8 for values in flat.values())


def test_graft_sweeps_from_the_sinks_solve_an_acyclic_graph_in_one_sweep():
    one = graft(REWARDS, KEYS, NEXT, TERMINAL, gamma=0.5, sweeps=1)
    converged = graft(REWARDS, KEYS, NEXT, TERMINAL, gamma=0.5)
    for values, expected in zip(one, converged, strict=True):
        np.testing.assert_allclose(values, expected)


def test_graft_with_a_sweep_cap_lets_graph_gae_carry_the_value_error():
    # s -> s (a wall, reward 0) then s -> goal (reward 1). gamma 0.5. Converged V(s) = 1 / (2 - gamma);
    # one sweep from V = 0 leaves V(s) = (0 + 1) / 2 = 0.5, so delta = (-0.25, 0.5) and
    # G(s) = mean(-0.25 + gamma lam G(s), 0.5) -> with gamma lam = 0.5, G(s) = 1/6.
    args = ([[0.0, 1.0]], [["s", "s"]], [["s", "goal"]], [True])
    np.testing.assert_allclose(graft(*args, gamma=0.5, lam=0.0, sweeps=1)[0], [-0.25, 0.5])
    np.testing.assert_allclose(graft(*args, gamma=0.5, lam=1.0, sweeps=1)[0], [-0.25 + 0.5 / 6, 0.5])
    converged = 1 / 1.5
    np.testing.assert_allclose(graft(*args, gamma=0.5, lam=1.0)[0], [0.5 * converged - converged, 1 - converged])


def test_graft_terminal_ends_are_value_zero_even_when_their_key_names_a_decision_state():
    # t1 stops at x for good (terminated); t2 passes through x and wins. A terminal end is worth 0,
    # not V(x) = 1: V(s) = (0 + 0.5 x 0 + 0 + 0.5 x 1) / 2 = 0.25.
    t1, t2 = graft([[0.0], [0.0, 1.0]], [["s"], ["s", "x"]], [["x"], ["x", "goal"]], [True, True], gamma=0.5)
    np.testing.assert_allclose(t1, [0.0 - 0.25])
    np.testing.assert_allclose(t2, [0.5 - 0.25, 0.0])


def test_graft_lone_path_steps_get_zero():
    # After the branch each path is visited once: its steps carry no credit, the branch does.
    t1, t2 = graft(
        [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],
        [["s", "a", "c"], ["s", "b", "d"]],
        [["a", "c", "goal"], ["b", "d", "hole"]],
        [True, True],
        gamma=1.0,
    )
    np.testing.assert_allclose(t1, [0.5, 0.0, 0.0])
    np.testing.assert_allclose(t2, [-0.5, 0.0, 0.0])


# ----------------------------------------------------------------------------- over episodes
def episode(episode_id, rewards, keys, final_key, *, terminated=True, success=None):
    steps = [
        StepRecord(index=i, round=i, agent="player", observation="", reward=reward, state_key=key)
        for i, (reward, key) in enumerate(zip(rewards, keys, strict=True))
    ]
    return Episode(
        episode_id=episode_id,
        game_id="g",
        group_id="g0",
        agents=["player"],
        policies={"player": "p"},
        steps=steps,
        returns={"player": float(sum(rewards))},
        success={"player": success if success is not None else sum(rewards) > 0},
        terminated=terminated,
        truncated=not terminated,
        final_state_keys={"player": final_key},
    )


def fixture_episodes():
    return [
        episode("t1", REWARDS[0], KEYS[0], "goal"),
        episode("t2", REWARDS[1], KEYS[1], "hole"),
        episode("t3", REWARDS[2], KEYS[2], "hole"),
    ]


def test_pgpo_and_graft_over_episodes_follow_steps_to_the_recorded_next_state():
    credit = assign_credit("pgpo", fixture_episodes(), params={"gamma": 0.5, "std": "population", "eps": 1e-12})
    expected = pgpo(REWARDS, KEYS, NEXT, TERMINAL, SUCCESS, gamma=0.5, std="population", eps=1e-12)
    for trajectory, values in zip(credit.trajectories, expected, strict=True):
        np.testing.assert_allclose(trajectory.advantages, values)
    credit = assign_credit("graft", fixture_episodes(), params={"gamma": 0.5})
    expected = graft(REWARDS, KEYS, NEXT, TERMINAL, gamma=0.5)
    for trajectory, values in zip(credit.trajectories, expected, strict=True):
        np.testing.assert_allclose(trajectory.advantages, values)


def test_a_truncated_episode_is_followed_to_the_state_it_stopped_in():
    # e0 wins through x; e1 stops (step limit) right after reaching x. Its last step led somewhere
    # good: PGPO and GRAFT read that from the recorded final state key.
    episodes = [
        episode("e0", [0.0, 1.0], ["s", "x"], "goal", success=True),
        episode("e1", [0.0], ["s"], "x", terminated=False, success=False),
        episode("e2", [0.0], ["s"], "y", terminated=False, success=False),
    ]
    rewards, keys = [[0.0, 1.0], [0.0], [0.0]], [["s", "x"], ["s"], ["s"]]
    nexts, terminal = [["x", "goal"], ["x"], ["y"]], [True, False, False]
    pgpo_credit = assign_credit("pgpo", episodes)
    for trajectory, values in zip(
        pgpo_credit.trajectories, pgpo(rewards, keys, nexts, terminal, [1.0, 0.0, 0.0]), strict=True
    ):
        np.testing.assert_allclose(trajectory.advantages, values)
    graft_credit = assign_credit("graft", episodes)
    for trajectory, values in zip(graft_credit.trajectories, graft(rewards, keys, nexts, terminal), strict=True):
        np.testing.assert_allclose(trajectory.advantages, values)
    assert graft_credit.trajectories[1].advantages[0] > 0 > graft_credit.trajectories[2].advantages[0]


@pytest.mark.parametrize("name", ["pgpo", "graft"])
def test_graph_assigners_refuse_steps_without_state_keys(name):
    episodes = fixture_episodes()
    episodes[0].steps[1].state_key = None
    with pytest.raises(ValueError, match=f"{name} needs the state key"):
        assign_credit(name, episodes)


def test_registry_needs_of_the_new_methods():
    assert CREDIT_ASSIGNERS["pgpo"].needs == {"groups", "state_keys", "next_state_keys"}
    assert CREDIT_ASSIGNERS["graft"].needs == {"groups", "state_keys", "next_state_keys"}
    assert CREDIT_ASSIGNERS["opd"].needs == {"teacher"}
    assert CREDIT_ASSIGNERS["dr-grpo"].aggregation == "constant"
