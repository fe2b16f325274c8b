"""Potential-based shaping on Frozen Lake: the hand-computed terms, the telescoping sum, the same optimal policy.

Mutations of ``games/frozen_lake.py`` / ``games/frozen_lake_rules.py`` that these tests were seen to
fail (each on its own, 2026-12-05): the sign of F flipped (``reward -= ...``); gamma on Phi(s)
instead of Phi(s') (``Phi(s') - gamma Phi(s)``); s and s' swapped (``gamma Phi(s) - Phi(s')``);
``shaping_gamma`` ignored (gamma = 1); a hole's Phi not 0 (only the goal's), and no terminal Phi
0 at all; the distance off by one (``distance + 1``); shaping applied when the option is off.
"""

import itertools

import pytest
from pydantic import ValidationError

from games import frozen_lake_rules as rules
from games.frozen_lake import FrozenLake

# S at distance 4 from G; the hole H at (1, 1).
MAP = ("SFF", "FHF", "FFG")


def play(actions, seed=0, **options):
    """Rewards and the positions visited (start included) of ``actions``, until the episode ends."""
    game = FrozenLake(**{"desc": MAP, "max_steps": 6, **options})
    game.reset(seed=seed)
    rewards, positions = [], [game.state.position]
    for action in actions:
        result = game.step({"player": action})
        rewards.append(result.rewards["player"])
        positions.append(game.state.position)
        if result.terminated["player"] or result.truncated["player"]:
            break
    return rewards, positions, game


def test_the_shaping_terms_on_a_hand_built_map():
    assert [rules.potential(MAP, p) for p in ((0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (1, 1))] == [
        -4.0, -3.0, -2.0, -1.0, 0.0, 0.0,
    ]  # fmt: skip
    rewards, _, _ = play(["right", "right", "down", "down"], shaping="distance")
    assert rewards == [1.0, 1.0, 1.0, 1.0 + 1.0]  # each step one nearer; the goal's 1 on top of the last
    rewards, _, _ = play(["left", "up", "down"], shaping="distance")  # walls keep it in place: F = 0
    assert rewards == [0.0, 0.0, 1.0]
    rewards, _, _ = play(["right", "down"], shaping="distance")  # into the hole: Phi(hole) = 0
    assert rewards == [1.0, 3.0]
    assert play(["right", "right", "down", "down"])[0] == [0.0, 0.0, 0.0, 1.0]  # no shaping by default
    rewards, _, _ = play(["right", "left"], shaping="distance", shaping_gamma=0.5)
    assert rewards == [0.5 * -3.0 + 4.0, 0.5 * -4.0 + 3.0]


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_the_shaping_terms_telescope_to_the_last_potential_minus_the_first(gamma):
    for seed, actions in enumerate(itertools.product(["left", "down", "right", "up"], repeat=4)):
        random_map = {"map_name": "random", "desc": None, "size": 4, "max_steps": 4}
        shaped, positions, game = play(actions, seed, shaping="distance", shaping_gamma=gamma, **random_map)
        plain, _, _ = play(actions, seed, **random_map)
        desc = game.state.desc
        terms = [s - p for s, p in zip(shaped, plain, strict=True)]
        steps = len(terms)
        discounted = sum(gamma**t * term for t, term in enumerate(terms))
        expected = gamma**steps * rules.potential(desc, positions[-1]) - rules.potential(desc, positions[0])
        assert discounted == pytest.approx(expected, abs=1e-9), (seed, actions)


def test_the_optimal_policy_is_unchanged():
    """Every action sequence of the hand-built map: the best shaped ones are the best plain ones."""

    def returns(**options):
        found = {}
        for actions in itertools.product(["left", "down", "right", "up"], repeat=6):
            rewards, _, _ = play(actions, **options)
            found[actions[: len(rewards)]] = sum(rewards)  # the moves played before the episode ended
        return found

    plain, shaped = returns(), returns(shaping="distance")
    best = {seq for seq, value in plain.items() if value == max(plain.values())}
    best_shaped = {seq for seq, value in shaped.items() if value == max(shaped.values())}
    assert best == best_shaped and all(len(seq) <= 6 for seq in best) and len(best) > 1
    assert all(shaped[seq] == pytest.approx(plain[seq] + 4.0) for seq in best)  # + Phi(goal) - Phi(S)


def test_without_shaping_a_move_earns_the_goals_1_and_nothing_else_as_before():
    """Off (the default, or ``shaping: none`` named): the reward of every move is 1 on the goal, else 0."""
    for seed, actions in enumerate(itertools.product(["left", "down", "right", "up"], repeat=4)):
        random_map = {"map_name": "random", "desc": None, "size": 4, "max_steps": 4}
        default, positions, game = play(actions, seed, **random_map)
        named, _, _ = play(actions, seed, shaping="none", **random_map)
        on_goal = [float(rules.tile(game.state.desc, position) == "G") for position in positions[1:]]
        assert default == named == on_goal, (seed, actions)


def test_gamma_without_shaping_is_refused():
    with pytest.raises(ValidationError, match="shaping_gamma only applies"):
        FrozenLake(desc=MAP, shaping_gamma=0.9)
