"""The Episode as the whole training record: how each step was sampled, whose seats, which steps train.

Before schema 4 the sampling temperature, whether the log-probabilities were the trainer's and who
played which seats travelled beside the episodes (``RolloutBatch`` fields); which steps train was
decided in four places and recorded nowhere.
"""

from __future__ import annotations

from training.credit import assign_credit
from training.rollout.engines import RolloutBatch, record_sampling
from training.rollout.sources import mark_trained_steps
from training.update import training_samples
from tsmg.episode import Episode, StepRecord


def _episode(episode_id: str, group: str, rewards: dict[str, float], tokens: bool = True) -> Episode:
    steps = [
        StepRecord(
            index=index,
            round=index // 2,
            agent=agent,
            observation="",
            token_ids=[7] if tokens else None,
            logprobs=[-0.5] if tokens else None,
            prompt_token_ids=[1, 2],
        )
        for index, agent in enumerate(["a", "b", "a", "b"])
    ]
    return Episode(
        episode_id=episode_id,
        game_id="g",
        group_id=group,
        agents=["a", "b"],
        policies={"a": "model", "b": "model"},
        steps=steps,
        returns=rewards,
        terminated=True,
    )


def test_an_engine_records_how_the_model_seats_were_sampled():
    episodes = [_episode("u1/s1/g0", "u1/s1", {"a": 1.0, "b": 0.0})]
    record_sampling(episodes, ["b"], 0.7, exact_logprobs=False)
    [episode] = episodes
    assert episode.model_seats == ["b"]
    assert [(step.agent, step.temperature, step.exact_logprobs) for step in episode.steps] == [
        ("a", None, None),
        ("b", 0.7, False),
        ("a", None, None),
        ("b", 0.7, False),
    ]
    batch = RolloutBatch(episodes)
    assert batch.temperature == 0.7 and batch.exact_logprobs is False
    record_sampling(episodes, None, 1.0, exact_logprobs=True)  # already recorded steps keep what they have
    assert episode.model_seats == ["a", "b"] and episode.steps[1].temperature == 0.7
    assert episode.steps[0].temperature == 1.0 and RolloutBatch(episodes).exact_logprobs is False


def test_which_steps_train_is_recorded_on_every_step_and_training_follows_it():
    group = [_episode(f"u1/s1/g{k}", "u1/s1", {"a": float(k), "b": 0.0}) for k in range(2)]
    no_tokens = _episode("u1/s2/g0", "u1/s2", {"a": 1.0, "b": 0.0}, tokens=False)
    episodes = [*group, no_tokens]
    credit = assign_credit("ms-grpo", episodes, agent="a")
    mark_trained_steps(episodes, credit)
    for episode in group:  # seat a is credited, seat b is not
        assert [step.trains for step in episode.steps] == [True, False, True, False]
    assert {step.trains for step in no_tokens.steps} == {False}  # nothing a sample needs
    by_id = {episode.episode_id: episode for episode in episodes}
    samples = training_samples(credit.steps(), by_id)
    assert len(samples) == 4  # two steps of seat a in each episode of the group
    group[0].steps[0].trains = False  # the record decides: a step marked False never becomes a sample
    assert len(training_samples(credit.steps(), by_id)) == 3


def test_training_samples_take_exactness_from_each_step():
    episodes = [_episode(f"u1/s1/g{k}", "u1/s1", {"a": float(k), "b": 0.0}) for k in range(2)]
    record_sampling(episodes[:1], None, 1.0, exact_logprobs=True)
    record_sampling(episodes[1:], None, 1.0, exact_logprobs=False)
    credit = assign_credit("ms-grpo", episodes, agent="a")
    samples = training_samples(credit.steps(), {episode.episode_id: episode for episode in episodes})
    assert [sample.behaviour_logprobs for sample in samples] == [[-0.5], [-0.5], None, None]
