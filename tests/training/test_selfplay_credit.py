"""Self-play credit: SPIRAL's role-conditioned baseline (rae) and MARSHAL's per-agent normalisation (marshal).

Hand-computed cases, the invariants of ALGORITHMS.md (alpha = 0 gives R - R(previous) per role;
each seat's advantages have mean 0; a seat's baseline never reads another seat's returns), and
the same through ``assign_credit`` over episode records.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.advantages import per_agent_normalized, role_baseline_advantages
from training.credit import CREDIT_ASSIGNERS, assign_credit, credit_state_metrics
from tsmg.episode import Episode, StepRecord

returns_lists = st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=1, max_size=20)


# ----------------------------------------------------------------------------- RAE, the formula
def test_rae_hand_computed():
    # x: A = 1 - 0, b = 0.5; o: A = -1 - 0, b = -0.5; x: A = 1 - 0.5, b = 0.75; o: A = 0 + 0.5, b = -0.25
    advantages, baselines = role_baseline_advantages([1.0, -1.0, 1.0, 0.0], ["x", "o", "x", "o"], {}, alpha=0.5)
    np.testing.assert_allclose(advantages, [1.0, -1.0, 0.5, 0.5])
    assert baselines == {"x": 0.75, "o": -0.25}


def test_rae_starts_from_the_baselines_given_and_does_not_change_them():
    before = {"x": 2.0}
    advantages, after = role_baseline_advantages([1.0], ["x"], before, alpha=0.9)
    np.testing.assert_allclose(advantages, [-1.0])
    assert after["x"] == pytest.approx(0.9 * 2.0 + 0.1 * 1.0) and before == {"x": 2.0}


@given(returns_lists, st.lists(st.sampled_from(["x", "o"]), min_size=20, max_size=20))
@settings(max_examples=50, deadline=None)
def test_rae_with_alpha_zero_is_r_minus_the_previous_return_of_the_role(returns, roles):
    roles = roles[: len(returns)]
    advantages, _ = role_baseline_advantages(returns, roles, {}, alpha=0.0)
    previous: dict[str, float] = {}
    for value, role, advantage in zip(returns, roles, advantages, strict=True):
        assert advantage == pytest.approx(value - previous.get(role, 0.0))
        previous[role] = value


@given(returns_lists, returns_lists, st.floats(min_value=0.0, max_value=1.0))
@settings(max_examples=50, deadline=None)
def test_a_roles_baseline_never_reads_another_roles_returns(first, second, alpha):
    # The same x returns interleaved with two different o sequences: x's advantages are the same.
    size = min(len(first), len(second))
    xs = first[:size]

    def x_advantages(os):
        returns = [value for pair in zip(xs, os, strict=True) for value in pair]
        advantages, _ = role_baseline_advantages(returns, ["x", "o"] * size, {}, alpha=alpha)
        return advantages[0::2]

    np.testing.assert_allclose(x_advantages(second[:size]), x_advantages([-v for v in second[:size]]))


@given(returns_lists, st.integers(min_value=0, max_value=20), st.floats(min_value=0.0, max_value=1.0))
@settings(max_examples=50, deadline=None)
def test_rae_in_two_calls_with_the_state_carried_equals_one_call(returns, cut, alpha):
    roles = ["x" if index % 3 else "o" for index in range(len(returns))]
    whole, end = role_baseline_advantages(returns, roles, {}, alpha=alpha)
    cut = min(cut, len(returns))
    head, middle = role_baseline_advantages(returns[:cut], roles[:cut], {}, alpha=alpha)
    tail, after = role_baseline_advantages(returns[cut:], roles[cut:], middle, alpha=alpha)
    np.testing.assert_allclose(np.concatenate([head, tail]), whole)
    assert after == pytest.approx(end)


def test_rae_with_alpha_one_keeps_the_initial_baseline():
    advantages, after = role_baseline_advantages([3.0, 5.0], ["x", "x"], {"x": 1.0}, alpha=1.0)
    np.testing.assert_allclose(advantages, [2.0, 4.0])
    assert after == {"x": 1.0}


def test_rae_refuses_mismatched_lengths_and_a_bad_alpha():
    with pytest.raises(ValueError, match="roles"):
        role_baseline_advantages([1.0, 2.0], ["x"], {})
    with pytest.raises(ValueError, match="alpha"):
        role_baseline_advantages([1.0], ["x"], {}, alpha=1.5)


# ----------------------------------------------------------------------------- per-agent normalisation
def test_per_agent_normalisation_hand_computed():
    # a's steps 1, 3, 5: mean 3, sample std 2; b's steps 10, 10, 40: mean 20, sample std sqrt(300)
    result = per_agent_normalized([[1.0, 3.0], [10.0], [5.0], [10.0, 40.0]], ["a", "b", "a", "b"], eps=0.0)
    np.testing.assert_allclose(result[0], [-1.0, 0.0])
    np.testing.assert_allclose(result[2], [1.0])
    spread = np.sqrt(300.0)
    np.testing.assert_allclose(result[1], [-10.0 / spread])
    np.testing.assert_allclose(result[3], [-10.0 / spread, 20.0 / spread])
    centred = per_agent_normalized([[1.0, 3.0], [5.0]], ["a", "a"], normalizer="none")
    np.testing.assert_allclose(np.concatenate(centred), [-2.0, 0.0, 2.0])
    population = per_agent_normalized([[0.0], [2.0]], ["a", "a"], std="population", eps=0.0)
    np.testing.assert_allclose(np.concatenate(population), [-1.0, 1.0])


trajectories = st.lists(
    st.tuples(st.sampled_from(["x", "o", "z"]), st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=5)),
    min_size=1,
    max_size=12,
)


@given(trajectories)
@settings(max_examples=60, deadline=None)
def test_per_agent_normalisation_leaves_each_seat_with_mean_zero(items):
    agents = [agent for agent, _ in items]
    result = per_agent_normalized([values for _, values in items], agents)
    for agent in set(agents):
        steps = np.concatenate([values for values, owner in zip(result, agents, strict=True) if owner == agent])
        assert abs(steps.mean()) < 1e-6


@given(trajectories, st.floats(-100, 100, allow_nan=False))
@settings(max_examples=60, deadline=None)
def test_per_agent_normalisation_ignores_the_other_seats_values(items, shift):
    agents = [agent for agent, _ in items]
    values = [list(part) for _, part in items]
    moved = [[v + shift for v in part] if agent != "x" else part for agent, part in zip(agents, values, strict=True)]
    before = per_agent_normalized(values, agents)
    after = per_agent_normalized(moved, agents)
    for agent, a, b in zip(agents, before, after, strict=True):
        if agent == "x":
            np.testing.assert_allclose(a, b)


# ----------------------------------------------------------------------------- over episode records
def duel(episode_id, group_id, x_return, *, moves=(("x", 0.0), ("o", 0.0), ("x", 0.0)), game_id="duel"):
    steps = [
        StepRecord(index=index, round=index, agent=agent, observation="", reward=reward)
        for index, (agent, reward) in enumerate(moves)
    ]
    last = {agent: index for index, (agent, _) in enumerate(moves)}
    steps[last["x"]].reward += x_return
    steps[last["o"]].reward -= x_return
    return Episode(
        episode_id=episode_id,
        game_id=game_id,
        group_id=group_id,
        agents=["x", "o"],
        policies={"x": "m", "o": "m"},
        steps=steps,
        returns={"x": x_return, "o": -x_return},
    )


def test_rae_over_episodes_keeps_a_baseline_per_game_and_seat_across_calls():
    state: dict = {}
    first = [duel("e0", "g0", 1.0), duel("e1", "g1", -1.0)]
    credit = assign_credit("rae", first, params={"alpha": 0.5}, state=state)
    # x: 1 - 0 = 1 (b 0.5), then -1 - 0.5 = -1.5 (b -0.25); o mirrors it
    np.testing.assert_allclose(credit.trajectories[0].advantages, [1.0, 1.0])  # x, both steps
    np.testing.assert_allclose(credit.trajectories[1].advantages, [-1.0])  # o
    np.testing.assert_allclose(credit.trajectories[2].advantages, [-1.5, -1.5])
    np.testing.assert_allclose(credit.trajectories[3].advantages, [1.5])
    assert state == {"rae": {"duel/x": -0.25, "duel/o": 0.25}}
    assert credit_state_metrics(state) == {"credit/rae/duel/x": -0.25, "credit/rae/duel/o": 0.25}
    second = assign_credit("rae", [duel("e2", "g2", 1.0, game_id="other")], params={"alpha": 0.5}, state=state)
    np.testing.assert_allclose(second.trajectories[0].advantages, [1.0, 1.0])  # another game: a baseline of its own
    again = assign_credit("rae", [duel("e3", "g3", 0.0)], params={"alpha": 0.5}, state=state)
    np.testing.assert_allclose(again.trajectories[0].advantages, [0.25, 0.25])  # 0 - (-0.25): the kept baseline
    assert state["rae"]["other/x"] == 0.5


def test_rae_needs_no_groups_and_compares_across_the_whole_update():
    spec = CREDIT_ASSIGNERS["rae"]
    assert spec.scope == "batch" and spec.stateful and spec.needs == {"multi_agent"}
    credit = assign_credit("rae", [duel("e0", None, 1.0), duel("e1", None, 1.0)], params={"alpha": 0.0})
    # group_size 1 (no group ids): the second x compares with the first one's return
    np.testing.assert_allclose(credit.trajectories[2].advantages, [0.0, 0.0])
    assert credit.stats.groups == 2  # one comparison set per seat


def test_rae_with_per_agent_normalisation_centres_each_seat():
    episodes = [duel(f"e{index}", "g", value) for index, value in enumerate([1.0, 1.0, -1.0, 0.0])]
    credit = assign_credit("rae", episodes, params={"per_agent_norm": True})
    for seat in ("x", "o"):
        steps = np.concatenate([t.advantages for t in credit.trajectories if t.agent == seat])
        assert abs(steps.mean()) < 1e-9 and steps.std(ddof=1) == pytest.approx(1.0, rel=1e-4)


def test_marshal_hand_computed_turn_returns_normalised_per_seat():
    # x gets a turn reward of 1 on its first move in e0; gamma 0.5 makes turn returns differ
    e0 = duel("e0", "g0", 1.0, moves=(("x", 1.0), ("o", 0.0), ("x", 0.0)))
    e1 = duel("e1", "g1", -1.0)
    credit = assign_credit("marshal", [e0, e1], params={"gamma": 0.5, "normalizer": "none"})
    x0, o0, x1, o1 = credit.trajectories
    # x's turn returns: e0 [1 + 0.5 * 1, 1] = [1.5, 1.0], e1 [0.5 * -1, -1] = [-0.5, -1.0]; mean 0.25
    np.testing.assert_allclose(x0.advantages, [1.25, 0.75])
    np.testing.assert_allclose(x1.advantages, [-0.75, -1.25])
    # o's: e0 [-1], e1 [1]; mean 0
    np.testing.assert_allclose(o0.advantages, [-1.0])
    np.testing.assert_allclose(o1.advantages, [1.0])
    scaled = assign_credit("marshal", [e0, e1], params={"gamma": 0.5, "eps": 1e-12})
    spread = np.std([1.5, 1.0, -0.5, -1.0], ddof=1)
    np.testing.assert_allclose(scaled.trajectories[0].advantages, np.array([1.25, 0.75]) / spread)


def test_credit_if_leaves_the_opponents_seats_out_before_any_comparison():
    # The model played x in e0 and o in e1; the other seat was an opponent's: never credited, never compared.
    episodes = [duel("e0", "g0", 1.0), duel("e1", "g1", -1.0)]
    model_seat = {"e0": "x", "e1": "o"}
    unfiltered = assign_credit("marshal", episodes, params={"normalizer": "none"})
    assert all(np.all(t.advantages != 0.0) for t in unfiltered.trajectories)  # x: 1 vs -1, o: -1 vs 1
    credit = assign_credit(
        "marshal", episodes, params={"normalizer": "none"}, credit_if=lambda e, seat: model_seat[e.episode_id] == seat
    )
    assert [(t.episode_id, t.agent) for t in credit.trajectories] == [("e0", "x"), ("e1", "o")]
    # each seat has one trajectory: centred over itself, so 0 (an opponent's return would have shifted it)
    assert all(np.all(t.advantages == 0.0) for t in credit.trajectories)
