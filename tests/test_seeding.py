"""One seeding rule: plan positions to sampling seeds, with no collisions and no batch dependence."""

import itertools

import pytest

from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.lm import Completion
from tsmg.rollout import plan_episodes, rollout
from tsmg.seeding import SEED_BITS, combine_seeds, decision_seed, derive_seed


def test_the_collision_of_the_old_linear_hash_is_gone():
    # episode * 10007 + round * 101 + agent * 7 + attempt gave both of these 10007.
    first = decision_seed(0, game_seed=1, group_index=0, round=0, agent=0, attempt=0)
    second = decision_seed(0, game_seed=0, group_index=0, round=99, agent=1, attempt=1)
    assert first != second


def test_no_two_plan_positions_share_a_seed():
    positions = itertools.product(range(4), range(4), range(100), range(2), range(2))
    seeds = [
        decision_seed(5, game_seed=game, group_index=member, round=round_, agent=agent, attempt=attempt)
        for game, member, round_, agent, attempt in positions
    ]
    assert len(set(seeds)) == len(seeds) == 6400
    assert all(0 <= seed < 2**SEED_BITS for seed in seeds)


def test_keys_of_different_widths_and_nones_never_alias():
    # SeedSequence splits big ints into 32-bit words: [1, 2] and [1 + 2 * 2**32] would alias without fixed widths.
    assert derive_seed(1, 2) != derive_seed(1 + 2 * 2**32)
    assert derive_seed(None, 0) != derive_seed(0, None) != derive_seed(0, 0)
    # An unseeded episode is told apart by its index in the plan, never mistaken for a game seed.
    unseeded = decision_seed(0, game_seed=None, group_index=0, round=0, agent=0, attempt=0, episode_index=3)
    assert unseeded != decision_seed(0, game_seed=3, group_index=0, round=0, agent=0, attempt=0)
    # The index matters only without a game seed.
    seeded = [
        decision_seed(0, game_seed=3, group_index=0, round=0, agent=0, attempt=0, episode_index=index)
        for index in range(3)
    ]
    assert len(set(seeded)) == 1


def test_combine_seeds_is_the_rule_every_backend_follows():
    assert combine_seeds(None, None) is None
    assert combine_seeds(None, 7) == 7 and combine_seeds(3, None) == 3
    assert combine_seeds(3, 7) == derive_seed(3, 7) != combine_seeds(7, 3)


class SeedRecorder:
    """A stand-in model that answers "right" and remembers each request's seed."""

    name = "recorder"

    def __init__(self):
        self.seeds = []

    def generate(self, requests, sampling):
        self.seeds.extend(request.seed for request in requests)
        return [Completion(text="right") for _ in requests]


@pytest.mark.parametrize("max_concurrent", [None, 1])
def test_the_lap_seeds_each_request_by_its_plan_position(max_concurrent):
    model = SeedRecorder()
    lap = LAP(model, LAPConfig(action_format=ActionFormat(kind="raw"), seed=11))
    plans = plan_episodes("FrozenLake-v0", [7], group_size=3)
    episodes = rollout("FrozenLake-v0", lap, plans=plans, max_concurrent=max_concurrent)
    expected = {
        decision_seed(11, game_seed=7, group_index=member, round=step.round, agent=0, attempt=0)
        for member, episode in enumerate(episodes)
        for step in episode.steps
    }
    assert set(model.seeds) == expected and len(expected) == len(model.seeds)
