"""The rollout engine: batching, determinism, failures, records."""

import tsmg
from games import frozen_lake_rules as rules
from tsmg.policies import Decision, FixedPolicy, OraclePolicy, RandomPolicy
from tsmg.rollout import plan_episodes, rollout


class CountingPolicy:
    """Random legal play that records the size of every batch it is asked for."""

    name = "counting"

    def __init__(self):
        self.batch_sizes = []
        self.inner = RandomPolicy(seed=1)

    def act(self, requests):
        self.batch_sizes.append(len(requests))
        return self.inner.act(requests)


def test_every_live_episode_is_decided_in_one_call_per_round():
    policy = CountingPolicy()
    episodes = rollout("FrozenLake-v0", policy, seeds=range(16))
    rounds = max(e.num_rounds for e in episodes)
    assert len(policy.batch_sizes) == rounds
    assert policy.batch_sizes[0] == 16
    assert sum(policy.batch_sizes) == sum(len(e.steps) for e in episodes)


def without_timing(episodes):
    return [e.model_dump(exclude={"latency_s": True, "steps": {"__all__": {"latency_s"}}}) for e in episodes]


def test_concurrency_bound_and_results_do_not_depend_on_it():
    policy = CountingPolicy()
    bounded = rollout("FrozenLake-NoSlip-v0", policy, seeds=range(20), max_concurrent=4)
    assert max(policy.batch_sizes) <= 4
    unbounded = rollout("FrozenLake-NoSlip-v0", CountingPolicy(), seeds=range(20))
    assert without_timing(bounded) == without_timing(unbounded)


def test_same_seeds_same_episodes():
    first = rollout("FrozenLake-Slippery-v0", RandomPolicy(seed=4), seeds=range(10))
    second = rollout("FrozenLake-Slippery-v0", RandomPolicy(seed=4), seeds=range(10))
    assert without_timing(first) == without_timing(second)


def test_oracle_success_equals_fraction_of_maps_solvable_within_the_limit():
    seeds = range(500)
    episodes = rollout("FrozenLake-NoSlip-v0", OraclePolicy(), seeds=seeds)
    game = tsmg.make("FrozenLake-NoSlip-v0")
    solvable = 0
    for seed in seeds:
        game.reset(seed=seed)
        distance = rules.shortest_path_length(game.state.desc)
        solvable += distance is not None and distance <= 8
    assert sum(e.success["player"] for e in episodes) == solvable
    random_rate = sum(e.success["player"] for e in rollout("FrozenLake-NoSlip-v0", RandomPolicy(), seeds=seeds)) / 500
    assert random_rate < 0.05


def test_oracle_fails_exactly_on_maps_too_long_for_the_limit():
    seeds = range(200)
    episodes = rollout("FrozenLake-NoSlip-v0", OraclePolicy(), seeds=seeds, game_options={"max_steps": 6})
    game = tsmg.make("FrozenLake-NoSlip-v0", max_steps=6)
    for seed, episode in zip(seeds, episodes, strict=True):
        game.reset(seed=seed)
        distance = rules.shortest_path_length(game.state.desc)
        assert episode.success["player"] == (distance is not None and distance <= 6)


def test_step_rewards_add_up_to_returns_and_records_are_complete():
    [episode] = rollout("FrozenLake-v0", OraclePolicy(), seeds=[0])
    assert episode.returns == {"player": 1.0}
    assert sum(step.reward for step in episode.steps) == 1.0
    assert episode.terminated and not episode.truncated and episode.num_rounds == 6
    assert sorted(step.parsed_action for step in episode.steps) == ["down"] * 3 + ["right"] * 3
    assert episode.policies == {"player": "oracle"}


def test_invalid_answers_are_counted():
    [episode] = rollout("FrozenLake-v0", FixedPolicy("fly"), seeds=[0])
    assert episode.terminated and episode.invalid_answers == 3  # forfeit after 3 in a row (forfeit_after)
    assert episode.steps[0].reason.startswith("expected one of")


def test_a_failing_policy_fails_its_episodes_not_the_run():
    class Flaky:
        name = "flaky"

        def __init__(self):
            self.calls = 0

        def act(self, requests):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("backend unreachable")
            return [Decision(action="right") for _ in requests]

    finished = []
    episodes = rollout("FrozenLake-v0", Flaky(), seeds=range(3), on_episode=finished.append)
    assert all("backend unreachable" in e.error for e in episodes)
    assert len(finished) == 3


def test_plans_give_stable_ids_and_groups():
    plans = plan_episodes("FrozenLake-v0", [3, 4], group_size=2)
    assert [p.episode_id for p in plans] == [
        "FrozenLake-v0/s3/g0",
        "FrozenLake-v0/s3/g1",
        "FrozenLake-v0/s4/g0",
        "FrozenLake-v0/s4/g1",
    ]
    episodes = rollout("FrozenLake-NoSlip-v0", RandomPolicy(), plans=plans)
    assert episodes[0].group_id == episodes[1].group_id != episodes[2].group_id
    assert episodes[0].steps[0].observation == episodes[1].steps[0].observation


def test_independent_schedule_gives_the_same_episodes_and_never_waits_for_a_slow_one():
    import threading
    import time

    lockstep = rollout("FrozenLake-Slippery-v0", RandomPolicy(seed=7), seeds=range(12))

    class SlowOnSeedZero:
        name = "random"
        prefers_independent_episodes = True

        def __init__(self):
            self.inner = RandomPolicy(seed=7)
            self.finished_while_slow = 0
            self.slow_running = threading.Event()

        def act(self, requests):
            if requests[0].episode_seed == 0 and requests[0].round == 0:
                self.slow_running.set()
                time.sleep(0.5)  # the other episodes must finish meanwhile
            return self.inner.act(requests)

    policy = SlowOnSeedZero()
    order = []
    independent = rollout(
        "FrozenLake-Slippery-v0", policy, seeds=range(12), max_concurrent=4, on_episode=lambda e: order.append(e.seed)
    )
    assert without_timing(independent) == without_timing(lockstep)
    assert order[-1] == 0  # the slow episode finished last; the others did not wait for it


def test_a_group_of_random_policy_episodes_differs_and_replays():
    from tsmg.policies import RandomPolicy
    from tsmg.rollout import plan_episodes

    plans = plan_episodes("FrozenLake-v0", [7], group_size=4)
    first = rollout("FrozenLake-v0", RandomPolicy(seed=0), plans=plans)
    again = rollout("FrozenLake-v0", RandomPolicy(seed=0), plans=plans, max_concurrent=1)
    moves = [tuple(step.action for step in episode.steps) for episode in first]
    assert len(set(moves)) == 4  # the group's members do not replay one another
    assert moves == [tuple(step.action for step in episode.steps) for episode in again]  # batching aside


def test_a_stepwise_episode_records_what_the_engine_records_for_the_same_answers():
    """A seat played from outside (StepwiseEpisode) leaves the record the engine writes when a policy plays it."""
    import pytest

    from tsmg.core import Invalid
    from tsmg.rollout import EpisodePlan, StepwiseEpisode

    answers = ["5", "5", "1", "9", "3", "7", "2", "4", "6", "8"]  # some invalid: a repeat, cells taken

    class Scripted:
        name = "caller"

        def __init__(self):
            self.left = list(answers)

        def act(self, requests):
            return [Decision(self.left.pop(0)) for _ in requests]

    opponent = RandomPolicy(seed=3)
    [played] = rollout("TicTacToe-v0", {"player_0": Scripted(), "player_1": opponent}, seeds=[11])
    episode = StepwiseEpisode("TicTacToe-v0", EpisodePlan(11, played.episode_id), "player_0", opponent, name="caller")
    left = list(answers)
    while not episode.finished:
        assert episode.request().agent == "player_0" and "player_0" in episode.game.active_agents
        episode.play(Decision(left.pop(0)))
    ignore = {"latency_s": True, "steps": {"__all__": {"latency_s"}}}
    assert episode.record.model_dump(exclude=ignore) == played.model_dump(exclude=ignore)
    assert played.invalid_answers >= 1  # the repeat, and cells the opponent took first
    with pytest.raises(tsmg.GameError, match="is over"):
        episode.play(Decision("1"))
    # Stopped early: the record so far, marked truncated; an invalid answer goes by the game's rule
    early = StepwiseEpisode(
        "FrozenLake-v0", EpisodePlan(0, "e"), "player", opponent, game_options={"invalid_penalty": 1}
    )
    early.play(Decision(Invalid("no move")))
    record = early.stop()
    assert record.truncated and not record.terminated and record.returns == {"player": -1.0}
    assert [step.reason for step in record.steps] == ["no move"]
    with pytest.raises(ValueError, match="has no seat 'nobody'"):
        StepwiseEpisode("TicTacToe-v0", EpisodePlan(0, "e"), "nobody", opponent)
